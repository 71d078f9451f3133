// glm4moe (llama.cpp's src/models/glm4-moe.cpp): GLM-4.5/4.6/4.7.
// Pre-norm: x += Attn(RMSNorm(x)); x += FFN(RMSNorm_post_attention_norm(x)).
// Attention: q/k/v biases (no o bias), optional per-head q/k RMSNorm, partial
// NEOX RoPE over rope.dimension_count dims. The first leading_dense_block_count
// layers have a dense SwiGLU FFN; the others route with sigmoid gating
// (expert_gating_func 2): selection by sigmoid + exp_probs_b, weights the
// unbiased sigmoids, renormalised (expert_weights_norm) and scaled
// (expert_weights_scale), plus expert_shared_count shared experts added
// unweighted. The last nextn_predict_layers blocks are NextN/MTP heads: part
// of block_count, never run by the trunk, not loaded (ignored here).
#include <string>

#include "model/arch.h"
#include "model/arch/tensor_plan.h"
#include "util/error.h"

namespace sluice::model {

ArchDesc describe_glm4moe(const ArchReader& r) {
  ArchDesc d;
  d.hp = r.common();
  d.hp.rope.type = RopeType::Neox;
  if (!d.hp.is_moe()) r.bad("expert_count", "glm4moe needs experts");
  const uint32_t nextn = r.u32("nextn_predict_layers", 0);
  if (nextn >= d.hp.n_layer)
    r.bad("nextn_predict_layers", std::to_string(nextn) + " leaves no trunk layer of block_count " +
                                      std::to_string(d.hp.n_layer));
  const uint32_t trunk = d.hp.n_layer - nextn;
  const uint32_t lead = r.u32("leading_dense_block_count", 0);
  if (lead > trunk) r.bad("leading_dense_block_count", std::to_string(lead) + " exceeds the " +
                                                           std::to_string(trunk) + " trunk layers");
  if (lead > 0 && d.hp.n_ff == 0) r.bad("feed_forward_length", "must be > 0 for the leading dense layers");
  const uint32_t gating = r.u32("expert_gating_func", 2);
  if (gating != 2) r.bad("expert_gating_func", std::to_string(gating) + " is not supported (2: sigmoid)");
  const uint32_t n_shared = r.u32("expert_shared_count", 0);
  LayerDesc dense, moe;
  dense.attn.q_bias = dense.attn.k_bias = dense.attn.v_bias = Need::Required;
  dense.attn.q_norm = dense.attn.k_norm = Need::Optional;
  dense.ffn_norm = "post_attention_norm";
  moe = dense;
  dense.ffn.kind = FfnKind::Dense;
  dense.ffn.n_ff = d.hp.n_ff;
  moe.ffn.kind = FfnKind::Moe;
  moe.ffn.shared_expert = n_shared > 0;
  moe.ffn.n_ff = d.hp.n_ff_exp * n_shared;
  moe.ffn.router.kind = RouterKind::SigmoidBiased;
  moe.ffn.router.selection_bias = Need::Required;
  moe.ffn.router.normalize = r.flag("expert_weights_norm", false);
  moe.ffn.router.weights_scale = r.f32("expert_weights_scale", 1.0f);
  describe_expert_groups(r, d.hp, moe.ffn.router);  // GLM-4.5's files: 1 group
  for (uint32_t il = 0; il < trunk; ++il) d.layers.push_back(il < lead ? dense : moe);
  for (uint32_t il = trunk; il < d.hp.n_layer; ++il) {
    d.ignored.push_back("blk." + std::to_string(il) + ".*");
    d.nextn.push_back({il, moe});  // an ordinary MoE block of this architecture
  }
  d.hp.n_layer = trunk;
  d.tied_output = false;
  return d;
}

// ---- the generator (sluice synth): the tensor/metadata plan

namespace {

// glm4moe (GLM-4.5/4.6/4.7): llama.cpp's LLM_ARCH_GLM4_MOE names and
// keys as in shared/golden/glm4moe-f32.gguf. Attention: q/k/v biases, no o
// bias, optional per-head q/k RMSNorm (cfg.qk_norm; GLM-4.5-Air has none),
// partial NEOX RoPE over rope.dimension_count = cfg.n_rot dims;
// post_attention_norm is the pre-FFN norm. FFN: leading dense blocks, then
// sigmoid-routed experts + shared expert (tensor_plan.cpp). cfg.n_nextn
// NextN blocks follow the trunk: full blocks plus nextn.eh_proj/enorm/hnorm/
// shared_head_norm (GLM's head reuses token_embd and output: no
// nextn.embed_tokens/shared_head_head, as in the golden file).
// Tensor order: llama-quantize's (PlanBuilder::sort_as_quantized).
void plan_glm4moe(const ArchSizes& cfg, PlanBuilder& p) {
  if (cfg.n_expert == 0) fail("--experts", "glm4moe needs at least one expert");
  const uint32_t n_rot = cfg.n_rot ? cfg.n_rot : cfg.head_dim;
  if (n_rot > cfg.head_dim || n_rot % 2 != 0)
    fail("--head-dim", "rope.dimension_count " + std::to_string(n_rot) + " must be even and at most the head dim " +
                           std::to_string(cfg.head_dim));
  const uint32_t n_blocks = cfg.n_layer + cfg.n_nextn;
  const std::string a = cfg.arch;
  p.general(cfg);
  p.md(a + ".block_count", gguf::Value::from_u32(n_blocks));
  p.md(a + ".context_length", gguf::Value::from_u32(cfg.context_length));
  p.md(a + ".embedding_length", gguf::Value::from_u32(cfg.n_embd));
  p.md(a + ".feed_forward_length", gguf::Value::from_u32(cfg.n_ff));
  p.md(a + ".attention.head_count", gguf::Value::from_u32(cfg.n_head));
  p.md(a + ".attention.head_count_kv", gguf::Value::from_u32(cfg.n_head_kv));
  p.md(a + ".attention.key_length", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".attention.value_length", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(cfg.rms_eps));
  p.md(a + ".rope.dimension_count", gguf::Value::from_u32(n_rot));
  p.md(a + ".rope.freq_base", gguf::Value::from_f32(cfg.rope_theta));
  add_moe_metadata(p, cfg);
  p.file_type(cfg);
  const uint64_t V = p.tokenizer();

  const uint64_t E = cfg.n_embd;
  const uint64_t Q = uint64_t{cfg.n_head} * cfg.head_dim, KV = uint64_t{cfg.n_head_kv} * cfg.head_dim;
  const GgmlType f32 = GgmlType::F32, at = quantize_fallback(cfg.attn_type, E);
  p.add("token_embd.weight", quantize_fallback(cfg.embd_type, E), {E, V}, Init::Embedding, 0, "--embd-type");
  p.add("output_norm.weight", f32, {E}, Init::Norm, 0, "--n-embd");
  p.add("output.weight", quantize_fallback(cfg.output_type, E), {E, V}, Init::Projection, 0, "--dense-type");
  for (uint32_t l = 0; l < n_blocks; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const GgmlType vt = more_bits_type(cfg, cfg.attn_v_type, l, n_blocks, E);
    p.add(b + "attn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "attn_q.weight", at, {E, Q}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_q.bias", f32, {Q}, Init::Bias, l, "--head-dim");
    p.add(b + "attn_k.weight", at, {E, KV}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_k.bias", f32, {KV}, Init::Bias, l, "--head-dim");
    p.add(b + "attn_v.weight", vt, {E, KV}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_v.bias", f32, {KV}, Init::Bias, l, "--head-dim");
    p.add(b + "attn_output.weight", quantize_fallback(cfg.attn_type, Q), {Q, E}, Init::Projection, l, "--dense-type");
    if (cfg.qk_norm) {
      p.add(b + "attn_q_norm.weight", f32, {cfg.head_dim}, Init::Norm, l, "--head-dim");
      p.add(b + "attn_k_norm.weight", f32, {cfg.head_dim}, Init::Norm, l, "--head-dim");
    }
    p.add(b + "post_attention_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    add_moe_ffn(p, cfg, b, l, n_blocks);
    if (l >= cfg.n_layer) add_nextn(p, cfg, b, l, V, /*own_head=*/false);
  }
  p.sort_as_quantized();
}

// GLM-4.5-like: 1 dense + MoE blocks, 1 NextN block, partial RoPE.
void tiny_glm4moe(ArchSizes& c) {
  c.n_ff = 192;
  c.n_ff_exp = 64;
  c.n_rot = 16;
  c.n_nextn = 1;
  c.context_length = 131072;
  c.rms_eps = 1e-5f;
}

}  // namespace

extern const ArchSynth synth_glm4moe = {plan_glm4moe, tiny_glm4moe};

}  // namespace sluice::model
