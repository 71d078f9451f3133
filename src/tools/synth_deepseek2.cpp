// deepseek2 for synth (DeepSeek-V3/R1, Kimi-K2, GLM-4.7-Flash): llama.cpp's
// LLM_ARCH_DEEPSEEK2 names and keys in the converter's current MLA form, as in
// shared/golden/deepseek2-f32.gguf and deepseek2-mtp-f32.gguf: head_count_kv 1,
// key_length = kv_lora_rank + rope dims (the cached latent row), value_length
// = kv_lora_rank, key_length_mla / value_length_mla the per-head q.k and v
// widths, attn_k_b {qk_nope, kv_lora, n_head} and attn_v_b {kv_lora, v_head,
// n_head} (the split attn_kv_b). q LoRA (attn_q_a, attn_q_a_norm, attn_q_b)
// or, with cfg.q_lora_rank 0, attn_q (DeepSeek-V2-Lite) without the
// q_lora_rank key. YaRN keys when cfg.rope_scaling_factor > 1, including
// rope.scaling.yarn_log_multiplier (0.1 * mscale_all_dim in the converter).
// FFN: synth_moe_ffn.cpp, plus expert groups. cfg.n_nextn NextN blocks follow
// the trunk with their own embed_tokens and shared_head_head (as the
// DeepSeek-V3 and GLM-4.7-Flash checkpoints carry them).
// Tensor order: llama-quantize's (PlanBuilder::sort_as_quantized).
#include <string>

#include "tools/synth_plan.h"
#include "util/error.h"

namespace sluice::tools {

SynthPlan plan_deepseek2(const SynthConfig& cfg) {
  if (cfg.n_expert == 0) fail("--experts", "deepseek2 needs at least one expert");
  if (cfg.n_rot == 0 || cfg.n_rot % 2 != 0 || cfg.n_rot >= cfg.head_dim)
    fail("--head-dim", "deepseek2's rope part (rope.dimension_count " + std::to_string(cfg.n_rot) +
                           ") must be even, > 0 and below key_length_mla " + std::to_string(cfg.head_dim));
  if (cfg.kv_lora_rank == 0 || cfg.head_dim_v == 0) fail("--head-dim", "deepseek2 needs kv_lora_rank and v head dim > 0");
  if (cfg.n_group > 0 && (cfg.n_expert % cfg.n_group != 0 || cfg.n_group_used == 0 || cfg.n_group_used > cfg.n_group ||
                          uint64_t{cfg.n_expert / cfg.n_group} * cfg.n_group_used < cfg.n_expert_used))
    fail("--experts", std::to_string(cfg.n_group) + " expert groups (" + std::to_string(cfg.n_group_used) +
                          " used) do not fit " + std::to_string(cfg.n_expert) + " experts with " +
                          std::to_string(cfg.n_expert_used) + " used");
  const uint32_t n_blocks = cfg.n_layer + cfg.n_nextn;
  PlanBuilder p;
  const std::string a = cfg.arch;
  p.general(cfg);
  p.md(a + ".block_count", gguf::Value::from_u32(n_blocks));
  p.md(a + ".context_length", gguf::Value::from_u32(cfg.context_length));
  p.md(a + ".embedding_length", gguf::Value::from_u32(cfg.n_embd));
  p.md(a + ".feed_forward_length", gguf::Value::from_u32(cfg.n_ff));
  p.md(a + ".attention.head_count", gguf::Value::from_u32(cfg.n_head));
  p.md(a + ".attention.head_count_kv", gguf::Value::from_u32(1));
  p.md(a + ".attention.key_length", gguf::Value::from_u32(cfg.kv_lora_rank + cfg.n_rot));
  p.md(a + ".attention.value_length", gguf::Value::from_u32(cfg.kv_lora_rank));
  p.md(a + ".attention.key_length_mla", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".attention.value_length_mla", gguf::Value::from_u32(cfg.head_dim_v));
  if (cfg.q_lora_rank > 0) p.md(a + ".attention.q_lora_rank", gguf::Value::from_u32(cfg.q_lora_rank));
  p.md(a + ".attention.kv_lora_rank", gguf::Value::from_u32(cfg.kv_lora_rank));
  p.md(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(cfg.rms_eps));
  p.md(a + ".rope.dimension_count", gguf::Value::from_u32(cfg.n_rot));
  p.md(a + ".rope.freq_base", gguf::Value::from_f32(cfg.rope_theta));
  if (cfg.rope_scaling_factor > 1.0f) {
    p.md(a + ".rope.scaling.type", gguf::Value::from_string("yarn"));
    p.md(a + ".rope.scaling.factor", gguf::Value::from_f32(cfg.rope_scaling_factor));
    p.md(a + ".rope.scaling.original_context_length", gguf::Value::from_u32(cfg.rope_orig_ctx));
    p.md(a + ".rope.scaling.yarn_log_multiplier", gguf::Value::from_f32(cfg.yarn_log_multiplier));
  }
  add_moe_metadata(p, cfg);
  if (cfg.n_group > 0) {
    p.md(a + ".expert_group_count", gguf::Value::from_u32(cfg.n_group));
    p.md(a + ".expert_group_used_count", gguf::Value::from_u32(cfg.n_group_used));
  }
  p.file_type(cfg);
  const uint64_t V = p.tokenizer(cfg);
  p.md(a + ".vocab_size", gguf::Value::from_u32(static_cast<uint32_t>(V)));

  const uint64_t E = cfg.n_embd, H = cfg.n_head, QR = cfg.q_lora_rank, KVR = cfg.kv_lora_rank;
  const uint64_t nope = cfg.head_dim - cfg.n_rot, VH = cfg.head_dim_v;
  const GgmlType f32 = GgmlType::F32, at = cfg.attn_type;
  p.add("token_embd.weight", quantize_fallback(cfg.embd_type, E), {E, V}, Init::Embedding, 0, "--embd-type");
  p.add("output_norm.weight", f32, {E}, Init::Norm, 0, "--n-embd");
  p.add("output.weight", quantize_fallback(cfg.output_type, E), {E, V}, Init::Projection, 0, "--dense-type");
  for (uint32_t l = 0; l < n_blocks; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    p.add(b + "attn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    if (QR > 0) {
      p.add(b + "attn_q_a.weight", quantize_fallback(at, E), {E, QR}, Init::Projection, l, "--dense-type");
      p.add(b + "attn_q_a_norm.weight", f32, {QR}, Init::Norm, l, "--dense-type");
      p.add(b + "attn_q_b.weight", quantize_fallback(at, QR), {QR, H * cfg.head_dim}, Init::Projection, l,
            "--dense-type");
    } else {
      p.add(b + "attn_q.weight", quantize_fallback(at, E), {E, H * cfg.head_dim}, Init::Projection, l, "--dense-type");
    }
    p.add(b + "attn_kv_a_mqa.weight", quantize_fallback(at, E), {E, KVR + cfg.n_rot}, Init::Projection, l,
          "--dense-type");
    p.add(b + "attn_kv_a_norm.weight", f32, {KVR}, Init::Norm, l, "--dense-type");
    p.add(b + "attn_k_b.weight", quantize_fallback(at, nope), {nope, KVR, H}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_v_b.weight", quantize_fallback(at, KVR), {KVR, VH, H}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_output.weight", quantize_fallback(at, H * VH), {H * VH, E}, Init::Projection, l, "--dense-type");
    p.add(b + "ffn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    add_moe_ffn(p, cfg, b, l, n_blocks);
    if (l >= cfg.n_layer) add_nextn(p, cfg, b, l, V, /*own_head=*/true);
  }
  p.sort_as_quantized();
  return p.take();
}

}  // namespace sluice::tools
