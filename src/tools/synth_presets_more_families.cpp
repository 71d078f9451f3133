// synth's presets of Gemma 4 MoE, LFM2-MoE, Qwen2-MoE and Ling 3.0 (issue
// 32): sizes and quantization mixes only; which tensors each file has is the
// architecture's generator's business (model/arch/arch_gemma4.cpp,
// arch_lfm2moe.cpp, arch_qwen2moe.cpp, arch_bailingmoe3.cpp).
//
// Types: Q4_K_M as llama-quantize (llama.cpp b10573) assigns it (set_q4_k_m);
// Gemma 4 and LFM2 tie their embeddings, so their token_embd is Q6_K.
#include "tools/synth_presets_more_families.h"

namespace sluice::tools {
// Gemma-4-26B-A4B (google/gemma-4-26b-a4b; its text_config as inlined by
// several public projects' tests and parsers found with the search tool, which
// agree): 30 layers, 5 sliding-window (window 1024, 8 KV heads of 256, rope
// theta 10000) then 1 full (2 KV heads of 512, K = V, proportional RoPE over a
// quarter of the pairs, theta 1e6); hidden 2816, 16 query heads; the dense
// GELU MLP 2112 wide beside 128 experts top-8 of width 704 (fused gate/up, as
// the converter writes them); vocab 262144; context 262144; rms eps 1e-6;
// final logit softcap 30; tied embeddings. The expert down rows (704) are not
// a multiple of 256: Q5_0, or Q8_0 in the more-bits blocks. Some model pages
// quote "hidden 2112, 704 intermediate": those are the MLP and expert widths.
SynthConfig gemma_4_26b_a4b() {
  SynthConfig c;
  c.arch = "gemma4";
  c.name = "sluice-synth-gemma-4-26b-a4b";
  c.n_layer = c.preset_layers = 30;
  c.swa_period = 6;
  c.n_embd = 2816;
  c.n_head = 16;
  c.n_head_kv = 8;
  c.head_dim_swa = 256;
  c.n_head_kv_full = 2;
  c.head_dim = 512;
  c.n_swa = 1024;
  c.n_ff = 2112;
  c.n_expert = 128;
  c.n_expert_used = 8;
  c.n_ff_exp = 704;
  c.fused_gate_up = true;
  c.n_vocab = 262144;
  c.context_length = 262144;
  c.rope_theta = 1e6f;
  c.rope_theta_swa = 1e4f;
  c.rms_eps = 1e-6f;
  c.logit_softcap = 30.0f;
  set_q4_k_m(c, true);
  return c;
}

// LFM2-8B-A1B (LiquidAI/LFM2-8B-A1B config.json, as published copies of it
// show): 24 blocks, attention at 2, 6, 10, 14, 18, 21 (32 query / 8 KV heads
// of 64), gated short convolutions of 3 taps elsewhere; hidden 2048; the first
// 2 blocks a dense SwiGLU of 7168, the others 32 experts top-4 of width 1792
// with sigmoid routing and an expert bias (use_expert_bias), normalised
// weights; vocab 65536; context 128000; rope theta 1e6; norm eps 1e-5; tied
// embeddings.
SynthConfig lfm2_8b_a1b() {
  SynthConfig c;
  c.arch = "lfm2moe";
  c.name = "sluice-synth-lfm2-8b-a1b";
  c.n_layer = c.preset_layers = 24;
  c.attention_layers = {2, 6, 10, 14, 18, 21};
  c.n_embd = 2048;
  c.n_head = 32;
  c.n_head_kv = 8;
  c.head_dim = 64;
  c.ssm_conv_kernel = 3;
  c.n_lead_dense = 2;
  c.n_ff = 7168;
  c.n_expert = 32;
  c.n_expert_used = 4;
  c.n_ff_exp = 1792;
  c.n_vocab = 65536;
  c.context_length = 128000;
  c.rope_theta = 1e6f;
  c.rms_eps = 1e-5f;
  set_q4_k_m(c, true);
  return c;
}

// Qwen2-57B-A14B (Qwen/Qwen2-57B-A14B-Instruct config.json, the largest
// qwen2moe): 28 blocks, hidden 3584, 28 query / 4 KV heads of 128 with q/k/v
// biases; 64 experts top-8 of width 2560 (softmax over all, weights not
// normalised) plus a sigmoid-gated shared expert of 20480; vocab 151936;
// context 32768 (the instruct model's; the base model says 131072); rope
// theta 1e6; rms eps 1e-6; an untied output matrix.
SynthConfig qwen2_57b_a14b() {
  SynthConfig c;
  c.arch = "qwen2moe";
  c.name = "sluice-synth-qwen2-57b-a14b";
  c.n_layer = c.preset_layers = 28;
  c.n_embd = 3584;
  c.n_head = 28;
  c.n_head_kv = 4;
  c.head_dim = 128;
  c.n_expert = 64;
  c.n_expert_used = 8;
  c.n_ff_exp = 2560;
  c.n_ff_shexp = 20480;
  c.n_ff = 18944;
  c.n_vocab = 151936;
  c.context_length = 32768;
  c.rope_theta = 1e6f;
  c.rms_eps = 1e-6f;
  set_q4_k_m(c);
  return c;
}

// Ling-3.0-tiny (inclusionAI/Ling-3.0-tiny, BailingMoeV3ForCausalLM; its
// config.json as a public project's test inlines it; llama.cpp b10573 names
// the shape LLM_TYPE_7_9B_A1_3B): 24 blocks, every 4th (3, 7, ..., 23) gated
// MLA (16 heads, q LoRA 256, kv LoRA 512, qk 128 + 64 rope, v 128), the
// others Kimi Delta Attention (16 heads of 128, conv of 4 taps); hidden 1536;
// block 0 a dense SwiGLU of 4608, the others 128 experts top-8 of width 512
// in 8 groups of which the best 4 compete (sigmoid + expert bias, normalised,
// scale 2.5) plus one shared expert of 512; vocab 157184; context 131072;
// rope theta 6e6; rms eps 1e-6; an untied output matrix. ("ling-2" in issue
// 32: the Ling 2.x checkpoints are bailingmoe2 and Ling 2.5/2.6 a lightning
// attention hybrid; the bailingmoe3 files llama.cpp converts are Ling 3.0.)
SynthConfig ling_30_tiny() {
  SynthConfig c;
  c.arch = "bailingmoe3";
  c.name = "sluice-synth-ling-3.0-tiny";
  c.n_layer = c.preset_layers = 24;
  c.full_attention_interval = 4;
  c.n_embd = 1536;
  c.n_head = 16;
  c.q_lora_rank = 256;
  c.kv_lora_rank = 512;
  c.head_dim = 192;
  c.n_rot = 64;
  c.head_dim_v = 128;
  c.ssm_state_size = 128;
  c.ssm_conv_kernel = 4;
  c.n_lead_dense = 1;
  c.n_ff = 4608;
  c.n_expert = 128;
  c.n_expert_used = 8;
  c.n_group = 8;
  c.n_group_used = 4;
  c.n_expert_shared = 1;
  c.n_ff_exp = 512;
  c.expert_weights_norm = true;
  c.expert_weights_scale = 2.5f;
  c.n_vocab = 157184;
  c.context_length = 131072;
  c.rope_theta = 6e6f;
  c.rms_eps = 1e-6f;
  set_q4_k_m(c);
  return c;
}

}  // namespace sluice::tools
