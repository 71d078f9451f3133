// gpt-oss (llama.cpp's src/models/openai-moe.cpp, arch name "gpt-oss").
// Pre-norm: x += Attn(RMSNorm_attn_norm(x)); x += MoE(RMSNorm_post_attention_norm(x)).
// Attention: q/k/v/o biases, NEOX RoPE with YaRN (rope.scaling.*, ggml's
// ext_factor 1, beta_fast 32, beta_slow 1), a learned sink logit per head, and
// a sliding window on every even layer (0, 2, ...; llama.cpp's period 2: there
// is no pattern key), full attention on odd ones.
// Router: logits + bias, top-k of the raw logits, softmax over the k selected.
// Experts: MXFP4 in the published files, with per-expert biases (resident) and
// the clamped SwiGLU (alpha 1.702, limit 7).
#include "model/arch.h"

namespace sluice::model {

ArchDesc describe_gpt_oss(const ArchReader& r) {
  ArchDesc d;
  d.hp = r.common();
  d.hp.rope.type = RopeType::Neox;
  if (!d.hp.is_moe()) r.bad("expert_count", "gpt-oss needs experts");
  const uint32_t window = r.u32("attention.sliding_window");
  if (window == 0) r.bad("attention.sliding_window", "must be > 0");
  for (uint32_t il = 0; il < d.hp.n_layer; ++il) {
    LayerDesc l;
    l.attn.q_bias = l.attn.k_bias = l.attn.v_bias = l.attn.o_bias = Need::Required;
    l.attn.sinks = Need::Required;
    l.attn.window = il % 2 == 0 ? window : 0;
    l.ffn_norm = "post_attention_norm";
    l.ffn.kind = FfnKind::Moe;
    l.ffn.act = Activation::SwiGluOai;
    l.ffn.expert_biases = Need::Required;
    l.ffn.router.kind = RouterKind::SoftmaxSelected;
    l.ffn.router.normalize = false;  // the softmax over the selected already sums to 1
    l.ffn.router.logit_bias = Need::Required;
    d.layers.push_back(l);
  }
  d.tied_output = false;
  return d;
}

}  // namespace sluice::model
