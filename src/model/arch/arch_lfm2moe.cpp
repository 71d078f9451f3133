// lfm2moe (llama.cpp's src/models/lfm2moe.cpp, graph of src/models/lfm2.cpp:
// LFM2-8B-A1B, LFM2-24B-A2B): a hybrid stack. Layer il is an attention layer
// iff attention.head_count_kv[il] > 0, else a gated short-convolution layer
// (AttentionKind::ShortConv, model/mixers/short_conv.h; its state is the last
// shortconv.l_cache - 1 conv inputs). Every layer: x += Mixer(RMSNorm(x) *
// attn_norm); x += FFN(RMSNorm(x) * ffn_norm). Attention: q/k/v (optional
// biases), per-head RMSNorm of q and k, NEOX RoPE, GQA, 1/sqrt(head_dim).
// FFN: the first leading_dense_block_count layers a dense SwiGLU of
// feed_forward_length, the others MoE with sigmoid gating (expert_gating_func
// 2), selection by sigmoid + exp_probs_b, weights the unbiased sigmoids
// renormalised (norm_w true in llama.cpp's graph; no weight scale: lfm2moe
// does not read expert_weights_scale). Final norm token_embd_norm (llama.cpp's
// LLM_TENSOR_OUTPUT_NORM_LFM2), lm head output.weight or the tied token_embd.
#include <algorithm>
#include <string>
#include <vector>

#include "model/arch.h"
#include "model/arch/tensor_plan.h"
#include "util/error.h"

namespace sluice::model {

ArchDesc describe_lfm2moe(const ArchReader& r) {
  ArchDesc d;
  HParams& hp = d.hp;
  hp = r.common();
  hp.rope.type = RopeType::Neox;
  if (!hp.is_moe()) r.bad("expert_count", "lfm2moe needs experts");
  const uint32_t l_cache = r.u32("shortconv.l_cache");
  if (l_cache < 2 || l_cache > 64) r.bad("shortconv.l_cache", "must be in 2..64");

  // attention.head_count_kv: per layer, 0 = a short-conv layer. The attention
  // layers must agree (sluice's KV geometry is one per model here).
  const std::string kvk = "attention.head_count_kv";
  std::vector<uint32_t> kv(hp.n_layer, hp.n_head_kv);
  if (const gguf::Value* v = r.model().metadata().find(r.key(kvk)); v && v->type == gguf::ValueType::ARRAY) {
    const auto a = r.model().metadata().get_int_array(r.key(kvk));
    if (!a || a->size() != hp.n_layer)
      r.bad(kvk, std::to_string(a ? a->size() : 0) + " entries for " + std::to_string(hp.n_layer) + " layers");
    uint32_t attn_kv = 0;
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
      const int64_t h = (*a)[il];
      if (h < 0 || h > hp.n_head || (h > 0 && hp.n_head % h != 0))
        r.bad(kvk, "layer " + std::to_string(il) + ": " + std::to_string(h) +
                       " is neither 0 (short conv) nor a divisor of head_count " + std::to_string(hp.n_head));
      if (h > 0 && attn_kv > 0 && static_cast<uint32_t>(h) != attn_kv)
        r.bad(kvk, "attention layers with different kv head counts (" + std::to_string(attn_kv) + ", " +
                       std::to_string(h) + ") are not supported");
      if (h > 0) attn_kv = static_cast<uint32_t>(h);
      kv[il] = static_cast<uint32_t>(h);
    }
    if (attn_kv > 0) hp.n_head_kv = attn_kv;
  }
  if (hp.q_dim() != hp.n_embd)
    r.bad("attention.key_length", "heads x head dim " + std::to_string(hp.q_dim()) + " must equal embedding_length " +
                                      std::to_string(hp.n_embd) + " (attn_output is {n_embd, n_embd})");

  const uint32_t n_dense = r.u32("leading_dense_block_count", 0);
  if (n_dense > hp.n_layer) r.bad("leading_dense_block_count", std::to_string(n_dense) + " exceeds block_count");
  if (n_dense > 0 && hp.n_ff == 0) r.bad("feed_forward_length", "must be > 0 for the leading dense blocks");
  const uint32_t gating = r.u32("expert_gating_func");
  if (gating != 2) r.bad("expert_gating_func", std::to_string(gating) + " is not supported (2 = sigmoid)");

  for (uint32_t il = 0; il < hp.n_layer; ++il) {
    LayerDesc l;
    if (kv[il] == 0) {
      l.attn.kind = AttentionKind::ShortConv;
      l.attn.conv_taps = l_cache;
    } else {
      l.attn.q_norm = l.attn.k_norm = Need::Required;
      l.attn.q_bias = l.attn.k_bias = l.attn.v_bias = Need::Optional;
    }
    if (il < n_dense) {
      l.ffn.kind = FfnKind::Dense;
      l.ffn.n_ff = hp.n_ff;
    } else {
      l.ffn.kind = FfnKind::Moe;
      l.ffn.router.kind = RouterKind::SigmoidBiased;
      l.ffn.router.normalize = true;
      l.ffn.router.selection_bias = Need::Required;
    }
    d.layers.push_back(l);
  }
  d.output_norm = "token_embd_norm";
  d.tied_output = true;  // output.weight when present, else token_embd
  return d;
}

// ---- the generator (sluice synth): the tensor/metadata plan

namespace {

// Keys and tensors as llama.cpp's converter writes LLM_ARCH_LFM2MOE: layer il
// is attention (head_count_kv[il] = n_head_kv, else 0) iff il is in
// attention_layers when that is set (entries past a --layers cut are
// dropped), else iff (il + 1) % full_attention_interval == 0; conv layers
// shortconv.conv {L, E} (F32), in_proj {E, 3E}, out_proj {E, E}; attention layers attn_q/k/v/output with
// attn_q_norm/attn_k_norm {head_dim}; the first n_lead_dense blocks a dense
// SwiGLU of n_ff, the others ffn_gate_inp, stacked experts and
// exp_probs_b.bias; token_embd_norm; tied embeddings (no output.weight), as
// the LFM2 checkpoints.
void plan_lfm2moe(const ArchSizes& cfg, PlanBuilder& p) {
  reject_nextn(cfg);
  if (cfg.n_expert == 0) fail("--experts", "lfm2moe needs at least one expert");
  if (uint64_t{cfg.n_head} * cfg.head_dim != cfg.n_embd)
    fail("--head-dim", "lfm2moe needs heads x head dim = n_embd (llama.cpp's attn_output is {n_embd, n_embd})");
  if (cfg.full_attention_interval == 0) fail("full_attention_interval", "must be > 0");
  if (cfg.ssm_conv_kernel < 2) fail("shortconv.l_cache", "must be >= 2");
  const int32_t attn_kv = static_cast<int32_t>(cfg.n_head_kv);
  std::vector<int32_t> kv(cfg.n_layer, 0);
  if (cfg.attention_layers.empty()) {
    for (uint32_t l = 0; l < cfg.n_layer; ++l)
      if ((l + 1) % cfg.full_attention_interval == 0) kv[l] = attn_kv;
  }
  for (const int32_t l : cfg.attention_layers) {
    if (l < 0) fail("attention_layers", "a block index must be >= 0 (got " + std::to_string(l) + ")");
    if (static_cast<uint32_t>(l) < cfg.n_layer) kv[static_cast<size_t>(l)] = attn_kv;
  }
  const uint32_t n_attn_v = static_cast<uint32_t>(std::count_if(kv.begin(), kv.end(), [](int32_t h) { return h > 0; }));
  const uint32_t n_dense = std::min(cfg.n_lead_dense, cfg.n_layer);

  const std::string a = cfg.arch;
  p.general(cfg);
  p.md(a + ".block_count", gguf::Value::from_u32(cfg.n_layer));
  p.md(a + ".context_length", gguf::Value::from_u32(cfg.context_length));
  p.md(a + ".embedding_length", gguf::Value::from_u32(cfg.n_embd));
  p.md(a + ".feed_forward_length", gguf::Value::from_u32(cfg.n_ff));
  p.md(a + ".attention.head_count", gguf::Value::from_u32(cfg.n_head));
  p.md(a + ".attention.head_count_kv", gguf::Value::from_i32s(kv));
  p.md(a + ".rope.freq_base", gguf::Value::from_f32(cfg.rope_theta));
  p.md(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(cfg.rms_eps));
  p.md(a + ".shortconv.l_cache", gguf::Value::from_u32(cfg.ssm_conv_kernel));
  p.md(a + ".expert_count", gguf::Value::from_u32(cfg.n_expert));
  p.md(a + ".expert_used_count", gguf::Value::from_u32(cfg.n_expert_used));
  p.md(a + ".expert_feed_forward_length", gguf::Value::from_u32(cfg.n_ff_exp));
  p.md(a + ".leading_dense_block_count", gguf::Value::from_u32(n_dense));
  p.md(a + ".expert_gating_func", gguf::Value::from_u32(2));
  p.file_type(cfg);
  const uint64_t V = p.tokenizer();

  const uint64_t E = cfg.n_embd, X = cfg.n_expert, F = cfg.n_ff_exp, FD = cfg.n_ff, D = cfg.head_dim;
  const uint64_t KV = uint64_t{cfg.n_head_kv} * D, L = cfg.ssm_conv_kernel;
  const GgmlType f32 = GgmlType::F32;
  auto dense = [&](uint64_t row) { return quantize_fallback(cfg.attn_type, row); };
  p.add("token_embd.weight", quantize_fallback(cfg.embd_type, E), {E, V}, Init::Embedding, 0, "--embd-type");
  p.add("token_embd_norm.weight", f32, {E}, Init::Norm, 0, "--n-embd");
  uint32_t i_attn_v = 0;
  for (uint32_t l = 0; l < cfg.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    // llama-quantize's Q4_K_M: ffn_down* by block, attn_v by its index among the attn_v tensors.
    auto down = [&](GgmlType t, uint64_t row) { return more_bits_type(cfg, t, l, cfg.n_layer, row); };
    p.add(b + "attn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "ffn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    if (kv[l] > 0) {
      p.add(b + "attn_q.weight", dense(E), {E, E}, Init::Projection, l, "--dense-type");
      p.add(b + "attn_k.weight", dense(E), {E, KV}, Init::Projection, l, "--dense-type");
      const GgmlType vt = more_bits_type(cfg, cfg.attn_v_type, i_attn_v++, n_attn_v, E);
      p.add(b + "attn_v.weight", vt, {E, KV}, Init::Projection, l, "--dense-type");
      p.add(b + "attn_output.weight", dense(E), {E, E}, Init::Projection, l, "--dense-type");
      p.add(b + "attn_q_norm.weight", f32, {D}, Init::Norm, l, "--head-dim");
      p.add(b + "attn_k_norm.weight", f32, {D}, Init::Norm, l, "--head-dim");
    } else {
      p.add(b + "shortconv.conv.weight", f32, {L, E}, Init::Projection, l, "shortconv.l_cache");
      p.add(b + "shortconv.in_proj.weight", dense(E), {E, 3 * E}, Init::Projection, l, "--dense-type");
      p.add(b + "shortconv.out_proj.weight", dense(E), {E, E}, Init::Projection, l, "--dense-type");
    }
    if (l < n_dense) {
      p.add(b + "ffn_gate.weight", dense(E), {E, FD}, Init::Projection, l, "--dense-type");
      p.add(b + "ffn_up.weight", dense(E), {E, FD}, Init::Projection, l, "--dense-type");
      p.add(b + "ffn_down.weight", down(cfg.attn_type, FD), {FD, E}, Init::Projection, l, "--n-ff");
    } else {
      p.add(b + "ffn_gate_inp.weight", f32, {E, X}, Init::Router, l, "--n-embd");
      p.add(b + "exp_probs_b.bias", f32, {X}, Init::Bias, l, "--experts");
      p.add(b + "ffn_gate_exps.weight", quantize_fallback(cfg.expert_type, E), {E, F, X}, Init::Projection, l,
            "--type");
      p.add(b + "ffn_up_exps.weight", quantize_fallback(cfg.expert_type, E), {E, F, X}, Init::Projection, l,
            "--type");
      p.add(b + "ffn_down_exps.weight", down(cfg.down_type, F), {F, E, X}, Init::Projection, l,
            "--n-ff-exp");
    }
  }
  p.sort_as_quantized();
}

// A small LFM2-8B-A1B: 4 layers (short conv, attention, short conv,
// attention), the first with a dense FFN, 8 experts top-2, conv of 3 taps.
void tiny_lfm2moe(ArchSizes& c) {
  c.n_layer = 4;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.n_ff_exp = 64;
  c.n_ff = 256;
  c.n_lead_dense = 1;
  c.full_attention_interval = 2;
  c.ssm_conv_kernel = 3;
  c.context_length = 128000;
}

}  // namespace

extern const ArchSynth synth_lfm2moe = {plan_lfm2moe, tiny_lfm2moe};

}  // namespace sluice::model
