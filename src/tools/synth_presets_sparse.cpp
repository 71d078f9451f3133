// synth's presets of the sparse-attention giants (issue 33): DeepSeek-V4-Flash
// (deepseek4) and GLM-5 (glm-dsa). Sizes and quantization mixes only; which
// tensors each file has is the architecture's generator's business
// (model/arch/arch_deepseek4.cpp, arch_glm_dsa.cpp). Both exceed a small
// disk: use --layers (a cut of the first blocks) and --zero-data (sizing).
#include "tools/synth.h"
#include "tools/synth_presets_sparse.h"

namespace sluice::tools {

// DeepSeek-V4-Flash (deepseek-ai/DeepSeek-V4-Flash, 284B total / 13B active).
// config.json values as quoted in public code found with the search tool (a
// serving framework's unit test that inlines the published Flash config, and
// NVIDIA NeMo's model page for 43 layers / 256 experts / top-6 / 1 shared):
// hidden 4096, 43 blocks, 64 heads of 512 (one K = V head), rope 64 dims,
// q_lora 1024, 8 output groups of LoRA 1024, sliding window 128, 256 experts
// top-6 of width 2048 + 1 shared, sqrt-softplus with routed_scaling_factor
// 1.5 and normalised weights, indexer 64 heads x 128 with top-512, compress
// ratios 0, 0, then 4 / 128 alternating, ending with 4 (43 entries; the
// 44th, the MTP block's 0, is not written: llama.cpp's converter drops the
// MTP block from the main file), rope theta 10000, compress rope theta
// 160000, YaRN factor 16 over 65536, context 1048576, vocab 129280, rms eps
// 1e-6, 3 hash-routed blocks (an I32 token-to-expert table of 6 x 129280 x
// 4 B = 3.0 MiB each instead of exp_probs_b; random distinct experts per token
// here), hc_mult 4, 20 Sinkhorn iterations, SwiGLU limit 10. Types: as llama.cpp's converter writes
// DeepSeek-V4 (conversion/deepseek.py: the checkpoint's FP4 experts repacked
// to MXFP4; the FP8 dense matrices, dequantized, stored Q8_0 with
// --outtype q8_0), the "Q8_0 + MXFP4" files people run with llama.cpp.
SynthConfig deepseek_v4_flash() {
  SynthConfig c;
  c.arch = "deepseek4";
  c.name = "sluice-synth-deepseek-v4-flash";
  c.n_layer = c.preset_layers = 43;
  c.n_embd = 4096;
  c.n_head = 64;
  c.n_head_kv = 1;
  c.head_dim = c.head_dim_v = 512;
  c.n_rot = 64;
  c.q_lora_rank = 1024;
  c.dsv4_o_groups = 8;
  c.dsv4_o_lora_rank = 1024;
  c.dsv4_compress_ratios = {0, 0};
  for (int i = 0; i < 20; ++i) c.dsv4_compress_ratios.insert(c.dsv4_compress_ratios.end(), {4, 128});
  c.dsv4_compress_ratios.push_back(4);
  c.dsv4_hash_layers = 3;
  c.n_swa = 128;
  c.n_expert = 256;
  c.n_expert_used = 6;
  c.n_ff_exp = c.n_ff = 2048;
  c.n_expert_shared = 1;
  c.expert_weights_scale = 1.5f;
  c.expert_weights_norm = true;
  c.dsa_n_head = 64;
  c.dsa_head_dim = 128;
  c.dsa_top_k = 512;
  c.rope_theta = 10000.0f;
  c.rope_scaling_factor = 16.0f;
  c.rope_orig_ctx = 65536;
  c.context_length = 1048576;
  c.n_vocab = 129280;
  c.rms_eps = 1e-6f;
  c.expert_type = c.down_type = GgmlType::MXFP4;
  c.attn_type = c.attn_v_type = c.embd_type = c.output_type = GgmlType::Q8_0;
  return c;
}

// GLM-5 / GLM-5.1 (zai-org, 744B total / ~40B active). config.json values as
// quoted in public code found with the search tool (a model-info report of
// GLM-5.1's config.json; a vLLM issue quoting GLM-5's; DSA dimension tables):
// hidden 6144, 78 blocks (first_k_dense_replace 3, dense FFN 12288) + 1 NextN
// block, 64 heads, MLA q_lora 2048, kv_lora 512, qk_nope 192 + qk_rope 64,
// v_head 256, 256 experts top-8 of width 2048 + 1 shared, n_group 1, sigmoid
// with routed_scaling_factor 2.5, indexer 32 heads x 128 with top-2048 in
// every block (no indexer_types: GLM-5.2 added the shared-indexer pattern),
// rope theta 1e6 without scaling, context 202752, vocab 154880, rms eps 1e-5.
// Types: Q4_K_M as llama-quantize assigns it (q4_k_m_more_bits: ffn_down and
// attn_v Q6_K in the first and last eighth and every third block; Q4_K
// elsewhere; output Q6_K; rows that are not multiples of 256 fall back), the
// indexer's matrices F32 as llama-quantize leaves them (arch_glm_dsa.cpp).
// About 0.45 TB: --zero-data for inspect, --layers for a real-data cut.
SynthConfig glm_5() {
  SynthConfig c;
  c.arch = "glm-dsa";
  c.name = "sluice-synth-glm-5";
  c.n_layer = c.preset_layers = 78;
  c.n_nextn = 1;
  c.n_lead_dense = 3;
  c.n_embd = 6144;
  c.n_ff = 12288;
  c.n_ff_exp = 2048;
  c.n_expert = 256;
  c.n_expert_used = 8;
  c.n_expert_shared = 1;
  c.n_group = c.n_group_used = 1;
  c.expert_weights_scale = 2.5f;
  c.n_head = 64;
  c.n_head_kv = 1;
  c.q_lora_rank = 2048;
  c.kv_lora_rank = 512;
  c.head_dim = 192 + 64;
  c.n_rot = 64;
  c.head_dim_v = 256;
  c.dsa_n_head = 32;
  c.dsa_head_dim = 128;
  c.dsa_top_k = 2048;
  c.dsa_full_interval = 1;
  c.rope_theta = 1e6f;
  c.rope_scaling_factor = 0.0f;
  c.context_length = 202752;
  c.n_vocab = 154880;
  c.rms_eps = 1e-5f;
  set_q4_k_m(c);
  return c;
}

}  // namespace sluice::tools
