// glm-dsa (llama.cpp's src/models/glm-dsa.cpp): GLM-5 / GLM-5.x. deepseek2's
// blocks (MLA with q LoRA, leading dense layers, sigmoid-gated MoE with
// exp_probs_b and a shared expert, trailing NextN/MTP blocks) plus DeepSeek
// sparse attention: each trunk layer attends only the top-k keys its
// lightning indexer selects (model/mixers/dsa_attention.h). A layer is a
// "full" indexer layer (its own indexer.* tensors) or a "shared" one that
// reuses the selection of the nearest full layer below (attention.indexer.types;
// without the key: every layer full when context_length < 2^20 (GLM-5/5.1),
// else GLM-5.2's pattern 1,1 then 1,0,0,0 repeated). The NextN block runs
// plain dense MLA (llama.cpp's graph_mtp does not use the indexer).
#include <cmath>
#include <string>

#include "model/arch.h"
#include "model/arch/tensor_plan.h"
#include "util/error.h"

namespace sluice::model {

ArchDesc describe_deepseek2_family(const ArchReader& r, uint32_t default_gating);  // arch_deepseek2.cpp
extern const ArchSynth synth_deepseek2;

namespace {

// Which trunk layers run their own indexer.
std::vector<bool> indexer_types(const ArchReader& r, uint32_t n_trunk) {
  std::vector<bool> full(n_trunk);
  const std::string key = r.key("attention.indexer.types");
  if (const gguf::Value* v = r.model().metadata().find(key)) {
    if (v->type != gguf::ValueType::ARRAY ||
        (v->elem_type != gguf::ValueType::BOOL && v->elem_type != gguf::ValueType::UINT8 &&
         v->elem_type != gguf::ValueType::INT32 && v->elem_type != gguf::ValueType::UINT32))
      r.bad("attention.indexer.types", "must be an array of booleans (or integers)");
    if (v->array.size() < n_trunk)
      r.bad("attention.indexer.types", "has " + std::to_string(v->array.size()) + " entries for " +
                                           std::to_string(n_trunk) + " trunk layers");
    for (uint32_t il = 0; il < n_trunk; ++il) full[il] = v->array[il].u != 0 || v->array[il].i != 0;
  } else if (r.u32("context_length", 0) < (1u << 20)) {
    full.assign(n_trunk, true);
  } else {
    for (uint32_t il = 0; il < n_trunk; ++il) full[il] = il < 2 || (il - 2) % 4 == 0;
  }
  if (n_trunk > 0 && !full[0])
    r.bad("attention.indexer.types", "layer 0 must run its own indexer (a shared layer reuses the one below it)");
  return full;
}

}  // namespace

ArchDesc describe_glm_dsa(const ArchReader& r) {
  ArchDesc d = describe_deepseek2_family(r, 2);
  HParams& hp = d.hp;
  if (hp.mla_params.q_lora_rank == 0)
    r.bad("attention.q_lora_rank", "glm-dsa needs a q LoRA (the indexer reads the normalised q LoRA)");
  DsaParams& x = hp.dsa;
  x.n_head = r.u32("attention.indexer.head_count");
  x.head_dim = r.u32("attention.indexer.key_length");
  x.top_k = r.u32("attention.indexer.top_k");
  if (x.n_head == 0 || x.n_head > 4096) r.bad("attention.indexer.head_count", "must be in [1, 4096]");
  if (x.head_dim < hp.rope.n_rot || x.head_dim > 65536)
    r.bad("attention.indexer.key_length", std::to_string(x.head_dim) + " must be in [rope.dimension_count " +
                                              std::to_string(hp.rope.n_rot) + ", 65536] (its first dims are rotated)");
  if (x.top_k == 0 || x.top_k > (1u << 24)) r.bad("attention.indexer.top_k", "must be in [1, 2^24]");
  const std::vector<bool> full = indexer_types(r, hp.n_layer);
  for (uint32_t il = 0; il < hp.n_layer; ++il) {
    d.layers[il].attn.indexer = full[il] ? DsaIndexer::Full : DsaIndexer::Shared;
    if (!full[il])  // llama.cpp loads them if present, and never uses them
      for (const char* t : {"indexer.attn_q_b.weight", "indexer.attn_k.weight", "indexer.proj.weight",
                            "indexer.k_norm.weight", "indexer.k_norm.bias"})
        d.ignored.push_back("blk." + std::to_string(il) + "." + t);
  }
  return d;
}

// ---- the generator (sluice synth): the tensor/metadata plan

namespace {

// deepseek2's plan under the glm-dsa name (the same keys and tensors, as in
// shared/golden/glm-dsa-f32.gguf), plus the indexer keys and, in each full
// indexer block, indexer.attn_q_b {q_lora, H D}, indexer.attn_k {n_embd, D},
// indexer.k_norm weight and bias {D}, indexer.proj {n_embd, H}: F32, as
// llama-quantize leaves them (shared/golden/glm-dsa-kquants.gguf).
void plan_glm_dsa(const ArchSizes& cfg, PlanBuilder& p) {
  if (cfg.q_lora_rank == 0) fail("--q-lora-rank", "glm-dsa needs a q LoRA (the indexer reads it)");
  if (cfg.dsa_n_head == 0 || cfg.dsa_top_k == 0 || cfg.dsa_full_interval == 0 || cfg.dsa_head_dim < cfg.n_rot)
    fail("--arch", "glm-dsa's indexer needs heads, a top-k, a full-block interval and a key width >= the rope dims");
  synth_deepseek2.plan(cfg, p);
  const std::string a = cfg.arch;
  p.md(a + ".attention.indexer.head_count", gguf::Value::from_u32(cfg.dsa_n_head));
  p.md(a + ".attention.indexer.key_length", gguf::Value::from_u32(cfg.dsa_head_dim));
  p.md(a + ".attention.indexer.top_k", gguf::Value::from_u32(cfg.dsa_top_k));
  gguf::Value types;
  types.type = gguf::ValueType::ARRAY;
  types.elem_type = gguf::ValueType::BOOL;
  for (uint32_t l = 0; l < cfg.n_layer; ++l) types.array.push_back(gguf::Value::from_bool(l % cfg.dsa_full_interval == 0));
  p.md(a + ".attention.indexer.types", std::move(types));
  const uint64_t E = cfg.n_embd, H = cfg.dsa_n_head, D = cfg.dsa_head_dim, QR = cfg.q_lora_rank;
  const GgmlType f32 = GgmlType::F32;
  for (uint32_t l = 0; l < cfg.n_layer; l += cfg.dsa_full_interval) {
    const std::string b = "blk." + std::to_string(l) + ".indexer.";
    p.add(b + "attn_q_b.weight", f32, {QR, H * D}, Init::Projection, l, "--q-lora-rank");
    p.add(b + "attn_k.weight", f32, {E, D}, Init::Projection, l, "--n-embd");
    p.add(b + "k_norm.weight", f32, {D}, Init::Norm, l, "--n-embd");
    p.add(b + "k_norm.bias", f32, {D}, Init::Bias, l, "--n-embd");
    p.add(b + "proj.weight", f32, {E, H}, Init::Projection, l, "--n-embd");
  }
  p.sort_as_quantized();
}

// The shapes of shared/golden/glm-dsa-f32 (GLM-5-like, tiny): MLA 48 = 32 +
// 16 with v 32, q/kv LoRA 64, indexer 8 x 64 with top-k 16 on every other
// block, no expert groups, no YaRN.
void tiny_glm_dsa(ArchSizes& c) {
  c.n_head_kv = 1;
  c.head_dim = 48;
  c.n_rot = 16;
  c.head_dim_v = 32;
  c.q_lora_rank = c.kv_lora_rank = 64;
  c.n_ff = 192;
  c.n_ff_exp = 32;
  c.n_group = c.n_group_used = 0;
  c.rope_theta = 1e6f;
  c.rope_scaling_factor = 0.0f;
  c.rms_eps = 1e-5f;
  c.context_length = 202752;
  c.dsa_n_head = 8;
  c.dsa_head_dim = 64;
  c.dsa_top_k = 16;
  c.dsa_full_interval = 2;
}

}  // namespace

extern const ArchSynth synth_glm_dsa = {plan_glm_dsa, tiny_glm_dsa};

}  // namespace sluice::model
