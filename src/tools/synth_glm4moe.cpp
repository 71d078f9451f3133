// glm4moe for synth (GLM-4.5/4.6/4.7): llama.cpp's LLM_ARCH_GLM4_MOE names and
// keys as in shared/golden/glm4moe-f32.gguf. Attention: q/k/v biases, no o
// bias, optional per-head q/k RMSNorm (cfg.qk_norm; GLM-4.5-Air has none),
// partial NEOX RoPE over rope.dimension_count = cfg.n_rot dims;
// post_attention_norm is the pre-FFN norm. FFN: leading dense blocks, then
// sigmoid-routed experts + shared expert (synth_moe_ffn.cpp). cfg.n_nextn
// NextN blocks follow the trunk: full blocks plus nextn.eh_proj/enorm/hnorm/
// shared_head_norm (GLM's head reuses token_embd and output: no
// nextn.embed_tokens/shared_head_head, as in the golden file).
// Tensor order: llama-quantize's (PlanBuilder::sort_as_quantized).
#include <string>

#include "tools/synth_plan.h"
#include "util/error.h"

namespace sluice::tools {

SynthPlan plan_glm4moe(const SynthConfig& cfg) {
  if (cfg.n_expert == 0) fail("--experts", "glm4moe needs at least one expert");
  const uint32_t n_rot = cfg.n_rot ? cfg.n_rot : cfg.head_dim;
  if (n_rot > cfg.head_dim || n_rot % 2 != 0)
    fail("--head-dim", "rope.dimension_count " + std::to_string(n_rot) + " must be even and at most the head dim " +
                           std::to_string(cfg.head_dim));
  const uint32_t n_blocks = cfg.n_layer + cfg.n_nextn;
  PlanBuilder p;
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
  const uint64_t V = p.tokenizer(cfg);

  const uint64_t E = cfg.n_embd;
  const uint64_t Q = uint64_t{cfg.n_head} * cfg.head_dim, KV = uint64_t{cfg.n_head_kv} * cfg.head_dim;
  const GgmlType f32 = GgmlType::F32, at = quantize_fallback(cfg.attn_type, E);
  p.add("token_embd.weight", quantize_fallback(cfg.embd_type, E), {E, V}, Init::Embedding, 0, "--embd-type");
  p.add("output_norm.weight", f32, {E}, Init::Norm, 0, "--n-embd");
  p.add("output.weight", quantize_fallback(cfg.output_type, E), {E, V}, Init::Projection, 0, "--dense-type");
  for (uint32_t l = 0; l < n_blocks; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const GgmlType vt = quantize_fallback(more_bits_type(cfg, cfg.attn_v_type, l, n_blocks), E);
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
  return p.take();
}

}  // namespace sluice::tools
