// `sluice repack`: rewrites a stacked-expert GGUF into the expert-major layout
// (gguf/expert_layout.h), where one expert's gate, up and down sit together in
// one 4 KiB-aligned extent, so the expert store reads an expert in one request
// (or in ceil(bytes / 1 MiB) for experts above its 1 MiB chunk).
//
// Output: one GGUF v3 file with general.alignment = 4096. Every metadata entry
// is copied unchanged and in order (tokenizer included) except
// general.alignment (now 4096) and the split.* keys (the output is one file
// even when the input is split); sluice.expert_layout = "expert-major" and
// sluice.expert_layout.alignment = 4096 are appended. Every non-expert tensor
// keeps its name, type, shape and bytes; each layer's three stacked tensors are
// replaced, where the first of them stood, by 3 * n_expert 2-D tensors
// blk.L.ffn_{gate,up,down}_exps.E.weight in expert-major order.
//
// Streaming: the input is read in windows of 32 MiB per stream (for an
// expert layer, a run of consecutive experts from each of the three stacked
// tensors: three large sequential reads, ~100 MiB in all) and written through
// gguf::Writer's 8 MiB buffer; memory stays bounded whatever the model size
// (peak RSS ~170 MiB on the 17.4 GB model). The output goes through io::OutputFile: written
// to a temporary file beside OUT and renamed onto OUT only when complete, so a
// failure or a kill never leaves a truncated OUT (nor destroys an existing one
// under --force), and OUT can never be one of IN's files.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace sluice::tools {

struct RepackOptions {
  bool force = false;  // overwrite an existing OUT (never IN itself)
  // Called after each window with bytes of tensor data copied so far and the
  // total; the last call has done == total. Must not throw.
  std::function<void(uint64_t done, uint64_t total)> on_progress;
};

struct RepackResult {
  uint64_t bytes_written = 0;   // size of OUT
  uint64_t tensor_bytes = 0;    // tensor data copied (excluding padding)
  uint64_t n_tensors = 0;       // tensors in OUT
  uint64_t n_expert_layers = 0;
  double seconds = 0;
};

// Throws sluice::Error naming the file when: IN cannot be read or has no
// stacked expert tensors; IN is already expert-major; OUT is IN (or one of its
// splits); OUT exists and !force; or any read/write fails.
RepackResult repack_expert_major(const std::string& in_path, const std::string& out_path,
                                 const RepackOptions& opts = {});

}  // namespace sluice::tools
