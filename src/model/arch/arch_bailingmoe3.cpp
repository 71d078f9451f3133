// bailingmoe3 (llama.cpp's src/models/bailingmoe3.cpp: the Ling 3.0 linear
// hybrids, BailingMoeV3ForCausalLM: Ling-3.0-tiny 7.9B-A1.3B, Ling-3.0-flash
// 124B-A5.1B): a stack of Kimi Delta Attention layers
// (attention.head_count_kv[il] = 0; model/mixers/kda.h) and gated MLA layers
// (head_count_kv 1: DeepSeek's absorbed MLA, NORM RoPE on the rope part, scale
// 1/sqrt(key_length_mla), each head's output scaled by sigmoid(attn_gate .
// xn)); leading dense SwiGLU blocks, then MoE blocks with sigmoid gating +
// exp_probs_b selection limited to the best expert groups, optional weight
// norm and scale, and a shared expert. Trailing NextN/MTP blocks (gated MLA +
// MoE) are loaded only for --mtp. Not supported yet (refused by name): YaRN,
// SwiGLU clamps.
#include <algorithm>
#include <string>
#include <vector>

#include "model/arch.h"
#include "model/arch/tensor_plan.h"
#include "util/error.h"

namespace sluice::model {

ArchDesc describe_bailingmoe3(const ArchReader& r) {
  ArchDesc d;
  HParams& hp = d.hp;
  hp = r.common();
  hp.rope.type = RopeType::Norm;
  if (!hp.is_moe()) r.bad("expert_count", "bailingmoe3 needs experts");
  if (hp.rope.yarn_factor > 0.0f) r.bad("rope.scaling.type", "YaRN is not supported for bailingmoe3 yet");
  for (const char* clamp : {"swiglu_clamp_exp", "swiglu_clamp_shexp"})
    if (r.model().metadata().has(r.key(clamp))) r.bad(clamp, "SwiGLU clamping is not supported for bailingmoe3 yet");
  hp.n_head_kv = 1;  // the MLA layers' one latent "head"
  describe_mla(r, hp);

  // The KDA layers' sizes, as a DeltaNet's with n_k = n_v = head_count.
  DeltaNetParams& dn = hp.deltanet;
  dn.conv_kernel = r.u32("ssm.conv_kernel");
  dn.state_size = r.u32("kda.head_dim");
  dn.n_k_heads = dn.n_v_heads = hp.n_head;
  dn.gate_lower_bound = r.f32("kda.gate_lower_bound");
  constexpr uint32_t kMaxDim = 1u << 16;
  if (dn.conv_kernel < 1 || dn.conv_kernel > 64) r.bad("ssm.conv_kernel", "must be in 1..64");
  if (dn.state_size == 0 || dn.state_size > kMaxDim) r.bad("kda.head_dim", "must be in 1.." + std::to_string(kMaxDim));
  if (!(dn.gate_lower_bound < 0.0f)) r.bad("kda.gate_lower_bound", "must be < 0 (llama.cpp asserts it)");
  if (!r.flag("kda.safe_gate", true)) r.bad("kda.safe_gate", "false is not supported (llama.cpp asserts true)");

  // attention.head_count_kv: per layer, 0 = a KDA layer, 1 = an MLA layer.
  const std::string kvk = "attention.head_count_kv";
  const auto kv = r.model().metadata().get_int_array(r.key(kvk));
  if (!kv || kv->size() != hp.n_layer)
    r.bad(kvk, "must be an array of one entry per block (" + std::to_string(hp.n_layer) + "): 0 = KDA, 1 = MLA");

  const uint32_t nextn = r.u32("nextn_predict_layers", 0);
  if (nextn >= hp.n_layer)
    r.bad("nextn_predict_layers", std::to_string(nextn) + " leaves no trunk layer of block_count " +
                                      std::to_string(hp.n_layer));
  const uint32_t trunk = hp.n_layer - nextn;
  const uint32_t lead = r.u32("leading_dense_block_count", 0);
  if (lead > trunk) r.bad("leading_dense_block_count", std::to_string(lead) + " exceeds the trunk");
  if (lead > 0 && hp.n_ff == 0) r.bad("feed_forward_length", "must be > 0 for the leading dense layers");
  const uint32_t gating = r.u32("expert_gating_func");
  if (gating != 2) r.bad("expert_gating_func", std::to_string(gating) + " is not supported (2: sigmoid)");
  const uint32_t n_shared = r.u32("expert_shared_count");

  LayerDesc dense;
  dense.ffn.kind = FfnKind::Dense;
  dense.ffn.n_ff = hp.n_ff;
  LayerDesc moe;
  moe.ffn.kind = FfnKind::Moe;
  moe.ffn.shared_expert = true;  // llama.cpp builds it in every MoE block
  moe.ffn.n_ff = r.u32("expert_shared_feed_forward_length", hp.n_ff_exp * std::max(1u, n_shared));
  RouterDesc& router = moe.ffn.router;
  router.kind = RouterKind::SigmoidBiased;
  router.selection_bias = Need::Required;
  router.normalize = r.flag("expert_weights_norm", false);
  router.weights_scale = r.f32("expert_weights_scale", 1.0f);
  describe_expert_groups(r, hp, router);  // Ling-3.0: 8 groups, 4 used
  for (uint32_t il = 0; il < trunk; ++il) {
    LayerDesc l = il < lead ? dense : moe;
    const int64_t h = (*kv)[il];
    if (h == 0) {
      l.attn.kind = AttentionKind::Kda;
    } else if (h == 1) {
      l.attn.kind = AttentionKind::Mla;
      l.attn.head_gate = true;
    } else {
      r.bad(kvk, "layer " + std::to_string(il) + ": " + std::to_string(h) + " is neither 0 (KDA) nor 1 (MLA)");
    }
    d.layers.push_back(l);
  }
  // NextN/MTP blocks: gated MLA + MoE with the shared expert (llama.cpp's
  // graph_mtp), fed from the trunk's hidden after output_norm, its final norm
  // blk.N.layer_output_norm; the trunk's token_embd and output stand in (the
  // files have no nextn.embed_tokens or shared_head_head).
  for (uint32_t il = trunk; il < hp.n_layer; ++il) {
    if ((*kv)[il] != 1) r.bad(kvk, "NextN block " + std::to_string(il) + " must be 1 (MLA)");
    LayerDesc mtp = moe;
    mtp.attn.kind = AttentionKind::Mla;
    mtp.attn.head_gate = true;
    d.ignored.push_back("blk." + std::to_string(il) + ".*");
    NextnDesc head{il, mtp};
    head.head_norm = "layer_output_norm";  // llama.cpp requires it
    head.head_norm_need = Need::Required;
    d.nextn.push_back(head);
  }
  hp.n_layer = trunk;
  d.tied_output = true;  // output.weight when present, else token_embd
  return d;
}

// ---- the generator (sluice synth): the tensor/metadata plan

namespace {

// Keys and tensors as llama.cpp b10573 loads LLM_ARCH_BAILINGMOE3
// (load_arch_hparams / load_arch_tensors): block b is MLA iff (b + 1) %
// full_attention_interval == 0, else KDA (head_count_kv[b] 1 / 0); KDA blocks
// attn_q/k/v {E, D}, ssm_conv1d_{q,k,v} {K, 1, D}, ssm_f_a / ssm_g_a {E, D},
// ssm_beta {E, H}, ssm_a {1, H}, ssm_dt.bias {D}, ssm_norm {S}, attn_output
// {D, E} (D = H S, S = kda.head_dim = cfg.ssm_state_size); MLA blocks as
// deepseek2's (q LoRA or attn_q, attn_kv_a_mqa, attn_kv_a_norm, attn_k_b,
// attn_v_b) plus attn_gate {E, H}; the FFN as deepseek2's (tensor_plan.cpp).
// cfg.n_nextn NextN blocks follow the trunk: gated MLA + MoE blocks (head_count_kv
// 1) with nextn.eh_proj/enorm/hnorm, the head norm layer_output_norm and no own
// embed_tokens or shared_head_head, as llama.cpp b10573 loads Ling 3.0's MTP
// layer.
void plan_bailingmoe3(const ArchSizes& cfg, PlanBuilder& p) {
  if (cfg.n_expert == 0) fail("--experts", "bailingmoe3 needs at least one expert");
  if (cfg.n_rot == 0 || cfg.n_rot % 2 != 0 || cfg.n_rot >= cfg.head_dim)
    fail("--head-dim", "bailingmoe3's rope part (rope.dimension_count " + std::to_string(cfg.n_rot) +
                           ") must be even, > 0 and below key_length_mla " + std::to_string(cfg.head_dim));
  if (cfg.kv_lora_rank == 0 || cfg.head_dim_v == 0) fail("--head-dim", "bailingmoe3 needs kv_lora_rank and v head dim > 0");
  if (cfg.full_attention_interval == 0) fail("full_attention_interval", "must be > 0");
  const std::string a = cfg.arch;
  const uint32_t n_blocks = cfg.n_layer + cfg.n_nextn;
  std::vector<int32_t> kv(n_blocks);
  for (uint32_t l = 0; l < n_blocks; ++l)
    kv[l] = l >= cfg.n_layer || (l + 1) % cfg.full_attention_interval == 0 ? 1 : 0;
  p.general(cfg);
  p.md(a + ".block_count", gguf::Value::from_u32(n_blocks));
  p.md(a + ".context_length", gguf::Value::from_u32(cfg.context_length));
  p.md(a + ".embedding_length", gguf::Value::from_u32(cfg.n_embd));
  p.md(a + ".feed_forward_length", gguf::Value::from_u32(cfg.n_ff));
  p.md(a + ".attention.head_count", gguf::Value::from_u32(cfg.n_head));
  p.md(a + ".attention.head_count_kv", gguf::Value::from_i32s(kv));
  p.md(a + ".attention.key_length", gguf::Value::from_u32(cfg.kv_lora_rank + cfg.n_rot));
  p.md(a + ".attention.value_length", gguf::Value::from_u32(cfg.kv_lora_rank));
  p.md(a + ".attention.key_length_mla", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".attention.value_length_mla", gguf::Value::from_u32(cfg.head_dim_v));
  if (cfg.q_lora_rank > 0) p.md(a + ".attention.q_lora_rank", gguf::Value::from_u32(cfg.q_lora_rank));
  p.md(a + ".attention.kv_lora_rank", gguf::Value::from_u32(cfg.kv_lora_rank));
  p.md(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(cfg.rms_eps));
  p.md(a + ".rope.dimension_count", gguf::Value::from_u32(cfg.n_rot));
  p.md(a + ".rope.freq_base", gguf::Value::from_f32(cfg.rope_theta));
  p.md(a + ".ssm.conv_kernel", gguf::Value::from_u32(cfg.ssm_conv_kernel));
  p.md(a + ".kda.head_dim", gguf::Value::from_u32(cfg.ssm_state_size));
  p.md(a + ".kda.gate_lower_bound", gguf::Value::from_f32(-5.0f));
  add_moe_metadata(p, cfg);
  add_expert_groups(p, cfg);
  p.file_type(cfg);
  const uint64_t V = p.tokenizer();

  const uint64_t E = cfg.n_embd, H = cfg.n_head, QR = cfg.q_lora_rank, KVR = cfg.kv_lora_rank;
  const uint64_t nope = cfg.head_dim - cfg.n_rot, VH = cfg.head_dim_v, S = cfg.ssm_state_size, D = H * S;
  const uint64_t K = cfg.ssm_conv_kernel;
  const GgmlType f32 = GgmlType::F32, at = cfg.attn_type;
  auto dense = [&](uint64_t row) { return quantize_fallback(at, row); };
  p.add("token_embd.weight", quantize_fallback(cfg.embd_type, E), {E, V}, Init::Embedding, 0, "--embd-type");
  p.add("output_norm.weight", f32, {E}, Init::Norm, 0, "--n-embd");
  p.add("output.weight", quantize_fallback(cfg.output_type, E), {E, V}, Init::Projection, 0, "--dense-type");
  // llama-quantize's more-bits rule counts the attn_v tensors: the KDA blocks'.
  const auto n_kda = static_cast<uint32_t>(std::count(kv.begin(), kv.end(), 0));
  uint32_t i_kda = 0;
  for (uint32_t l = 0; l < n_blocks; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    p.add(b + "attn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    if (kv[l] == 0) {
      for (const char* n : {"attn_q", "attn_k"})
        p.add(b + n + ".weight", dense(E), {E, D}, Init::Projection, l, "--dense-type");
      p.add(b + "attn_v.weight", more_bits_type(cfg, at, i_kda++, n_kda, E), {E, D}, Init::Projection, l,
            "--dense-type");
      for (const char* n : {"ssm_conv1d_q", "ssm_conv1d_k", "ssm_conv1d_v"})
        p.add(b + n + ".weight", f32, {K, 1, D}, Init::Projection, l, "ssm.conv_kernel");
      p.add(b + "ssm_f_a.weight", dense(E), {E, D}, Init::Projection, l, "--dense-type");
      p.add(b + "ssm_beta.weight", dense(E), {E, H}, Init::Projection, l, "--dense-type");
      p.add(b + "ssm_a", f32, {1, H}, Init::Decay, l, "--heads");
      p.add(b + "ssm_dt.bias", f32, {D}, Init::Bias, l, "kda.head_dim");
      p.add(b + "ssm_g_a.weight", dense(E), {E, D}, Init::Projection, l, "--dense-type");
      p.add(b + "ssm_norm.weight", f32, {S}, Init::Norm, l, "kda.head_dim");
      p.add(b + "attn_output.weight", dense(D), {D, E}, Init::Projection, l, "--dense-type");
    } else {
      if (QR > 0) {
        p.add(b + "attn_q_a.weight", dense(E), {E, QR}, Init::Projection, l, "--dense-type");
        p.add(b + "attn_q_a_norm.weight", f32, {QR}, Init::Norm, l, "--dense-type");
        p.add(b + "attn_q_b.weight", dense(QR), {QR, H * cfg.head_dim}, Init::Projection, l, "--dense-type");
      } else {
        p.add(b + "attn_q.weight", dense(E), {E, H * cfg.head_dim}, Init::Projection, l, "--dense-type");
      }
      p.add(b + "attn_kv_a_mqa.weight", dense(E), {E, KVR + cfg.n_rot}, Init::Projection, l, "--dense-type");
      p.add(b + "attn_kv_a_norm.weight", f32, {KVR}, Init::Norm, l, "--dense-type");
      p.add(b + "attn_k_b.weight", dense(nope), {nope, KVR, H}, Init::Projection, l, "--dense-type");
      p.add(b + "attn_v_b.weight", dense(KVR), {KVR, VH, H}, Init::Projection, l, "--dense-type");
      p.add(b + "attn_gate.weight", dense(E), {E, H}, Init::Projection, l, "--dense-type");
      p.add(b + "attn_output.weight", dense(H * VH), {H * VH, E}, Init::Projection, l, "--dense-type");
    }
    p.add(b + "ffn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    add_moe_ffn(p, cfg, b, l, n_blocks);
    if (l >= cfg.n_layer) add_nextn(p, cfg, b, l, V, /*own_head=*/false, "layer_output_norm");
  }
  p.sort_as_quantized();
}

// 4 blocks (KDA, KDA, KDA, MLA), the first dense; 8 experts top-2 in 4 groups
// of which the best 2 compete (as Ling-3.0's 8 groups, 4 used) + 1 shared;
// KDA 4 heads of 32 with 4 conv taps; MLA q LoRA 64, kv LoRA 64, qk 48 (16
// rope), v 32.
void tiny_bailingmoe3(ArchSizes& c) {
  c.n_layer = 4;
  c.full_attention_interval = 4;
  c.n_lead_dense = 1;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.n_group = 4;
  c.n_group_used = 2;
  c.n_expert_shared = 1;
  c.n_ff_exp = 64;
  c.n_ff = 256;
  c.n_head = 4;
  c.ssm_state_size = 32;
  c.ssm_conv_kernel = 4;
  c.q_lora_rank = 64;
  c.kv_lora_rank = 64;
  c.head_dim = 48;
  c.n_rot = 16;
  c.head_dim_v = 32;
  c.expert_weights_scale = 2.5f;
  c.context_length = 8192;
}

}  // namespace

extern const ArchSynth synth_bailingmoe3 = {plan_bailingmoe3, tiny_bailingmoe3};

}  // namespace sluice::model
