// PlanBuilder and the plan pieces several architectures share: the
// DeepSeek-V3-style MoE half of glm4moe and deepseek2 (llama.cpp's
// LLM_ARCH_GLM4_MOE, LLM_ARCH_DEEPSEEK2 tensor maps: leading dense blocks,
// sigmoid-gated routed experts with the exp_probs_b selection bias, shared
// experts), the NextN/MTP block tensors (names and shapes as in
// shared/golden/{glm4moe,deepseek2,deepseek2-mtp,qwen35moe-mtp}-f32.gguf) and
// llama-quantize's Q4_K_M type rules; and the lookup of the registered generators.
#include "model/arch/tensor_plan.h"

#include <algorithm>
#include <string>

#include "model/arch.h"
#include "util/error.h"

namespace sluice::model {
namespace {

// llama.cpp's general.file_type (llama_ftype) that best describes the mix,
// keyed by the expert type since experts hold almost all the bytes.
uint32_t file_type_for(GgmlType expert_type) {
  switch (expert_type) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q8_0: return 7;
    case GgmlType::Q4_K: return 15;  // MOSTLY_Q4_K_M
    case GgmlType::Q6_K: return 18;
    case GgmlType::BF16: return 32;
    case GgmlType::MXFP4: return 38;  // MOSTLY_MXFP4_MOE
    default: return 0;
  }
}

// llama-quantize's use_more_bits (llama-quant.cpp): the first and last eighth
// of the blocks and every third block in between.
bool use_more_bits(uint32_t i, uint32_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// --layers may cut a preset below its leading dense blocks: then all written
// blocks are dense (leading_dense_block_count may not exceed the trunk).
uint32_t lead_dense(const ArchSizes& cfg) { return std::min(cfg.n_lead_dense, cfg.n_layer); }

}  // namespace

void PlanBuilder::add(std::string name, GgmlType type, std::vector<uint64_t> ne, Init init, uint32_t layer,
                      const char* flag) {
  if (!ggml_row_bytes(type, ne[0]))
    fail(flag, std::string(ggml_type_name(type)) + " needs rows that are a multiple of " +
                   std::to_string(ggml_type_info(type).block_elems) + " values, but " + name + " has rows of " +
                   std::to_string(ne[0]));
  plan_.tensors.push_back({std::move(name), type, std::move(ne), init, layer, false});
}

void PlanBuilder::general(const ArchSizes& cfg) {
  md("general.architecture", gguf::Value::from_string(cfg.arch));
  md("general.type", gguf::Value::from_string("model"));
  md("general.name", gguf::Value::from_string(cfg.name));
}

void PlanBuilder::file_type(const ArchSizes& cfg) {
  md("general.file_type", gguf::Value::from_u32(file_type_for(cfg.expert_type)));
  md("general.quantization_version", gguf::Value::from_u32(2));
}

uint32_t PlanBuilder::tokenizer(const char* builtin_pre) {
  uint32_t n_vocab = 0;
  for (auto& [k, v] : vocab_(&n_vocab)) {
    if (builtin_pre && builtin_vocab_ && k == "tokenizer.ggml.pre") v = gguf::Value::from_string(builtin_pre);
    plan_.metadata.emplace_back(std::move(k), std::move(v));
  }
  return n_vocab;
}

void PlanBuilder::sort_as_quantized() {
  // Block of a tensor, -1 outside blk.N (those come first).
  auto block = [](const PlannedTensor& t) { return t.name.rfind("blk.", 0) == 0 ? int64_t{t.layer} : int64_t{-1}; };
  std::stable_sort(plan_.tensors.begin(), plan_.tensors.end(), [&](const PlannedTensor& x, const PlannedTensor& y) {
    const int64_t bx = block(x), by = block(y);
    return bx != by ? bx < by : x.name < y.name;
  });
}

void reject_nextn(const ArchSizes& cfg) {
  if (cfg.n_nextn > 0) fail("--nextn", cfg.arch + " files carry no NextN/MTP blocks");
}

GgmlType quantize_fallback(GgmlType t, uint64_t row_len) {
  if (row_len % 256 == 0) return t;
  switch (t) {
    case GgmlType::Q4_K: return GgmlType::Q5_0;
    case GgmlType::Q5_K: return GgmlType::Q5_1;
    case GgmlType::Q6_K: return GgmlType::Q8_0;
    default: return t;
  }
}

GgmlType more_bits_type(const ArchSizes& cfg, GgmlType t, uint32_t index, uint32_t count, uint64_t row_len) {
  return quantize_fallback(cfg.q4_k_m_more_bits && use_more_bits(index, count) ? GgmlType::Q6_K : t, row_len);
}

void add_moe_metadata(PlanBuilder& p, const ArchSizes& cfg) {
  const std::string a = cfg.arch;
  p.md(a + ".expert_count", gguf::Value::from_u32(cfg.n_expert));
  p.md(a + ".expert_used_count", gguf::Value::from_u32(cfg.n_expert_used));
  p.md(a + ".expert_shared_count", gguf::Value::from_u32(cfg.n_expert_shared));
  p.md(a + ".expert_feed_forward_length", gguf::Value::from_u32(cfg.n_ff_exp));
  p.md(a + ".leading_dense_block_count", gguf::Value::from_u32(lead_dense(cfg)));
  p.md(a + ".expert_gating_func", gguf::Value::from_u32(2));  // sigmoid (+ exp_probs_b)
  p.md(a + ".expert_weights_scale", gguf::Value::from_f32(cfg.expert_weights_scale));
  p.md(a + ".expert_weights_norm", gguf::Value::from_bool(cfg.expert_weights_norm));
  // The converters write the key only for checkpoints that have NextN layers.
  if (cfg.n_nextn > 0) p.md(a + ".nextn_predict_layers", gguf::Value::from_u32(cfg.n_nextn));
}

void add_expert_groups(PlanBuilder& p, const ArchSizes& cfg) {
  if (cfg.n_group == 0) return;
  if (cfg.n_expert % cfg.n_group != 0 || cfg.n_group_used == 0 || cfg.n_group_used > cfg.n_group ||
      uint64_t{cfg.n_expert / cfg.n_group} * cfg.n_group_used < cfg.n_expert_used)
    fail("--experts", std::to_string(cfg.n_group) + " expert groups (" + std::to_string(cfg.n_group_used) +
                          " used) do not fit " + std::to_string(cfg.n_expert) + " experts with " +
                          std::to_string(cfg.n_expert_used) + " used");
  const std::string a = cfg.arch;
  p.md(a + ".expert_group_count", gguf::Value::from_u32(cfg.n_group));
  p.md(a + ".expert_group_used_count", gguf::Value::from_u32(cfg.n_group_used));
}

void add_moe_ffn(PlanBuilder& p, const ArchSizes& cfg, const std::string& b, uint32_t block, uint32_t n_blocks) {
  const uint64_t E = cfg.n_embd, X = cfg.n_expert, F = cfg.n_ff_exp, S = uint64_t{cfg.n_ff_exp} * cfg.n_expert_shared;
  const GgmlType f32 = GgmlType::F32, dense = cfg.attn_type;
  auto down = [&](GgmlType t, uint64_t row) { return more_bits_type(cfg, t, block, n_blocks, row); };
  if (block < lead_dense(cfg)) {
    const uint64_t FF = cfg.n_ff;
    p.add(b + "ffn_gate.weight", quantize_fallback(dense, E), {E, FF}, Init::Projection, block, "--dense-type");
    p.add(b + "ffn_up.weight", quantize_fallback(dense, E), {E, FF}, Init::Projection, block, "--dense-type");
    p.add(b + "ffn_down.weight", down(dense, FF), {FF, E}, Init::Projection, block, "--n-ff");
    return;
  }
  p.add(b + "ffn_gate_inp.weight", f32, {E, X}, Init::Router, block, "--n-embd");
  p.add(b + "exp_probs_b.bias", f32, {X}, Init::Bias, block, "--experts");
  p.add(b + "ffn_gate_exps.weight", quantize_fallback(cfg.expert_type, E), {E, F, X}, Init::Projection, block,
        "--type");
  p.add(b + "ffn_up_exps.weight", quantize_fallback(cfg.expert_type, E), {E, F, X}, Init::Projection, block, "--type");
  p.add(b + "ffn_down_exps.weight", down(cfg.down_type, F), {F, E, X}, Init::Projection, block, "--n-ff-exp");
  if (S == 0) return;
  p.add(b + "ffn_gate_shexp.weight", quantize_fallback(dense, E), {E, S}, Init::Projection, block, "--dense-type");
  p.add(b + "ffn_up_shexp.weight", quantize_fallback(dense, E), {E, S}, Init::Projection, block, "--dense-type");
  p.add(b + "ffn_down_shexp.weight", down(dense, S), {S, E}, Init::Projection, block, "--n-ff-exp");
}

void add_nextn(PlanBuilder& p, const ArchSizes& cfg, const std::string& b, uint32_t block, uint64_t n_vocab,
               bool own_head, const std::string& head_norm) {
  const uint64_t E = cfg.n_embd;
  const GgmlType f32 = GgmlType::F32;
  // eh_proj's input is concat(enorm(embedding), hnorm(hidden)): fan-in 2 n_embd.
  p.add(b + "nextn.eh_proj.weight", quantize_fallback(cfg.attn_type, 2 * E), {2 * E, E}, Init::Projection, block,
        "--dense-type");
  p.add(b + "nextn.enorm.weight", f32, {E}, Init::Norm, block, "--n-embd");
  p.add(b + "nextn.hnorm.weight", f32, {E}, Init::Norm, block, "--n-embd");
  p.add(b + head_norm + ".weight", f32, {E}, Init::Norm, block, "--n-embd");
  if (!own_head) return;
  // llama-quantize's token_embd/output rules match those exact names only, so
  // the head's copies take the default (dense) type.
  p.add(b + "nextn.embed_tokens.weight", quantize_fallback(cfg.attn_type, E), {E, n_vocab}, Init::Embedding, block,
        "--dense-type");
  p.add(b + "nextn.shared_head_head.weight", quantize_fallback(cfg.attn_type, E), {E, n_vocab}, Init::Projection,
        block, "--dense-type");
}


const ArchSynth* find_arch_synth(const std::string& arch) {
  for (const ArchEntry& e : architectures())
    if (arch == e.name) return e.synth;
  return nullptr;
}

std::vector<std::string> synth_architectures() {
  std::vector<std::string> names;
  for (const ArchEntry& e : architectures())
    if (e.synth) names.emplace_back(e.name);
  return names;
}

}  // namespace sluice::model
