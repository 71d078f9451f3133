// Where each routed expert's bytes live, for both expert layouts a GGUF file
// may have. This is the one place that knows the layouts; the expert store,
// the model, `sluice inspect` and `sluice repack` all go through it.
//
//  stacked       (llama.cpp's layout) blk.L.ffn_{gate,up,down}_exps.weight, each
//                {n_in, n_out, n_expert}: expert e of a part is the e-th
//                contiguous slice, so one expert is three separate extents.
//  expert-major  (written by `sluice repack`) one 2-D tensor per expert and
//                part, blk.L.ffn_{gate,up,down}_exps.E.weight {n_in, n_out},
//                stored expert 0 gate, up, down, expert 1 gate, ... with
//                general.alignment = 4096 and the metadata
//                sluice.expert_layout = "expert-major",
//                sluice.expert_layout.alignment = 4096, so one expert's three
//                parts form one 4 KiB-aligned extent (gaps < 4 KiB).
//
// A stacked layer may fuse gate and up (Gemma 4's converter):
// blk.L.ffn_gate_up_exps.weight {n_in, 2 n_ff, n_expert}, whose expert slice
// holds the gate rows [0, n_ff) then the up rows [n_ff, 2 n_ff). It is
// described as separate gate and up parts whose byte ranges are the two
// halves of that slice: adjacent, so the expert store reads gate+up as one
// extent (and down as the other), exactly as a separate-gate/up file's.
//
// "Which tensors are streamed experts" is one test, is_expert_tensor_name: a
// name that parse_expert_tensor_name accepts (the gate/up/down WEIGHT tensors
// of either layout). Everything else is dense and resident, including the
// per-expert biases some architectures carry (gpt-oss's
// blk.L.ffn_{gate,up,down}_exps.bias, {n_out, n_expert} F32): they are small
// (about 0.26% of gpt-oss-120b's expert bytes) and reading them with each
// expert would add three tiny reads to every expert fetch.
//
// Thread-safety: pure functions over an immutable GgufModel.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace sluice::gguf {

enum class ExpertLayout { None, Stacked, ExpertMajor };
const char* expert_layout_name(ExpertLayout l);  // "none", "stacked", "expert-major"

inline constexpr const char* kExpertLayoutKey = "sluice.expert_layout";
inline constexpr const char* kExpertLayoutAlignmentKey = "sluice.expert_layout.alignment";
inline constexpr const char* kExpertMajorValue = "expert-major";
inline constexpr uint64_t kExpertMajorAlignment = 4096;

// The three parts of an expert, in the order they are stored expert-major.
inline constexpr size_t kGate = 0, kUp = 1, kDown = 2;
inline constexpr std::array<const char*, 3> kExpertPartStems = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
inline constexpr const char* kFusedGateUpStem = "ffn_gate_up_exps";  // stacked only

// True for the tensors that are streamed routed-expert weights in either layout.
bool is_expert_tensor_name(std::string_view name);
bool is_expert_weight(const TensorInfo& t);

std::string stacked_expert_name(uint32_t layer, size_t part);                         // blk.L.ffn_up_exps.weight
std::string expert_major_name(uint32_t layer, size_t part, uint64_t expert);          // blk.L.ffn_up_exps.E.weight

// A parsed expert tensor name: "blk.L.STEM.weight" (stacked) or
// "blk.L.STEM.E.weight" (expert-major) with STEM one of kExpertPartStems.
struct ExpertTensorName {
  uint32_t layer = 0;
  size_t part = 0;                      // kGate / kUp / kDown
  std::optional<uint64_t> expert;       // set for expert-major names
  bool fused_gate_up = false;           // ffn_gate_up_exps (part is kGate: it holds gate and up)
};
std::optional<ExpertTensorName> parse_expert_tensor_name(std::string_view name);

// One part (gate, up or down) as seen by one expert. The same for every expert
// of the layer (validated).
struct ExpertPartInfo {
  GgmlType type = GgmlType::F32;
  std::vector<uint64_t> ne;  // one expert's matrix: {n_in, n_out}
  uint64_t bytes = 0;        // one expert's bytes of this part
  std::string tensor;        // the stacked tensor, or expert 0's tensor (for messages)
  bool fused = false;        // gate/up: one half of ffn_gate_up_exps
};

// The routed experts of one layer.
struct LayerExpertParts {
  ExpertLayout layout = ExpertLayout::None;  // None: the layer has no experts
  std::array<ExpertPartInfo, 3> part;        // kGate, kUp, kDown
  std::vector<std::array<ByteRange, 3>> experts;  // [expert][part]: where the bytes are

  bool present() const { return !experts.empty(); }
  uint64_t n_expert() const { return experts.size(); }
  uint64_t expert_bytes() const { return part[0].bytes + part[1].bytes + part[2].bytes; }
};

// The file's expert layout: from sluice.expert_layout when present (which must
// then name a known layout), else Stacked when a stacked gate/up/down tensor
// exists, else None. Throws sluice::Error naming the file for an unknown value.
ExpertLayout expert_layout(const GgufModel& m);

// Every layer's experts, indexed by layer (size: highest layer with expert
// tensors + 1; layers without experts are !present()). Validates: a layer has
// all three parts or none; stacked tensors are 3-D with the same n_expert;
// expert-major tensors are 2-D, numbered 0..n-1 without gaps, with one type and
// shape per part and the same count for every part; the two layouts are not
// mixed and agree with the metadata. Throws sluice::Error naming the file and
// the tensor otherwise.
std::vector<LayerExpertParts> layer_expert_parts(const GgufModel& m);

// The experts of a stacked layer given its three tensors (all non-null), with
// the same validation. For callers that already hold the tensors.
LayerExpertParts stacked_layer_parts(const GgufModel& m, uint32_t layer, const TensorInfo& gate,
                                     const TensorInfo& up, const TensorInfo& down);

}  // namespace sluice::gguf
