// synth's presets: sizes and quantization mixes only (what each file has is
// the architecture's generator's business, model/arch/). "tiny" per
// architecture comes from its generator; the real-model presets say which
// published files they model and where each value was checked.
#include <string>

#include "model/arch/tensor_plan.h"
#include "tools/synth.h"
#include "tools/synth_presets_more_families.h"
#include "tools/synth_presets_sparse.h"
#include "util/error.h"

namespace sluice::tools {
namespace {

// The architecture's tiny sizes (its generator's ArchSynth::tiny) on the
// ArchSizes defaults; `arch` must be registered.
SynthConfig tiny(const std::string& arch) {
  SynthConfig c;
  c.arch = arch;
  c.name = "sluice-synth-tiny";
  model::find_arch_synth(arch)->tiny(c);
  return c;
}


// DeepSeek-V3 / R1 (deepseek-ai/DeepSeek-V3 config.json): 61 blocks (3 dense),
// 256 routed experts top-8 in 8 groups (4 used) + 1 shared, MLA q_lora 1536,
// kv_lora 512, qk_nope 128 + qk_rope 64, v_head 128, YaRN factor 40 over 4096
// with mscale_all_dim 1 (yarn_log_multiplier 0.1), routed_scaling_factor 2.5.
// The checkpoint has one NextN block (layer 61), but llama.cpp's converter
// drops it for DeepSeek-V3 (DeepseekV2Model.skip_mtp: layers >= num_hidden_layers
// are skipped; block_count 61), so --nextn defaults to 0; --nextn 1 writes it
// as the MTP-keeping converters do (DeepSeek-V3.2, GLM-4.7-Flash). Types: Q4_K_M
// (set_q4_k_m below). The result, 404.5 GB, is the size usually quoted for
// DeepSeek-V3 Q4_K_M GGUFs (~404 GB; no per-tensor listing was checked).
SynthConfig deepseek_v3() {
  SynthConfig c;
  c.arch = "deepseek2";
  c.name = "sluice-synth-deepseek-v3";
  c.n_layer = c.preset_layers = 61;
  c.n_lead_dense = 3;
  c.n_expert = 256;
  c.n_expert_used = 8;
  c.n_group = 8;
  c.n_group_used = 4;
  c.n_expert_shared = 1;
  c.n_nextn = 0;
  c.n_embd = 7168;
  c.n_ff = 18432;
  c.n_ff_exp = 2048;
  c.n_head = 128;
  c.n_head_kv = 1;
  c.q_lora_rank = 1536;
  c.kv_lora_rank = 512;
  c.head_dim = 128 + 64;
  c.n_rot = 64;
  c.head_dim_v = 128;
  c.n_vocab = 129280;
  c.context_length = 163840;
  c.rope_theta = 10000.0f;
  c.rope_scaling_factor = 40.0f;
  c.rope_orig_ctx = 4096;
  c.yarn_log_multiplier = 0.1f;
  c.expert_weights_scale = 2.5f;
  c.rms_eps = 1e-6f;
  set_q4_k_m(c);
  return c;
}

// Kimi-K2-Instruct-0905 (moonshotai; DeepSeek-V3 architecture): 61 blocks
// (1 dense), 384 experts top-8, one group, 1 shared, 64 heads, vocab 163840,
// rope theta 50000, YaRN factor 64 over 4096 (mscale_all_dim 1), context
// 262144; the hidden sizes and MLA ranks are DeepSeek-V3's. Verified (search
// tool, a model-inspector report of the HF repo): 7168 / 61 / 64 heads / vocab
// 163840 / intermediate 18432 / theta 50000 / YaRN 64, 4096. From the HF
// config as remembered, not re-verified: routed_scaling_factor 2.827, 384
// experts, first_k_dense_replace 1, n_group 1, no NextN layers. Types: Q4_K_M
// as for deepseek-v3 (e.g. unsloth's Kimi-K2-Instruct-0905 Q4_K_M).
SynthConfig kimi_k2() {
  SynthConfig c = deepseek_v3();
  c.name = "sluice-synth-kimi-k2";
  c.n_lead_dense = 1;
  c.n_expert = 384;
  c.n_group = c.n_group_used = 1;
  c.n_head = 64;
  c.n_vocab = 163840;
  c.context_length = 262144;
  c.rope_theta = 50000.0f;
  c.rope_scaling_factor = 64.0f;
  c.expert_weights_scale = 2.827f;
  return c;
}

// GLM-4.5-Air (zai-org/GLM-4.5-Air): 46 blocks (1 dense, FFN 10944) + 1 NextN
// block (kept by llama.cpp's converter: block_count 47), 128 experts top-8 of
// width 1408 + 1 shared, 96 q / 8 kv heads of 128, partial rotary 0.5 (64
// dims), no q/k norm, q/k/v biases, theta 1e6, rms eps 1e-5, vocab 151552,
// context 131072, routed_scaling_factor 1.0. Verified (search tool, slime's
// glm4.5-106B-A12B Megatron script): 1 dense + 45 MoE blocks, 4096 wide, 96/8
// heads x 128, FFN 10944, expert FFN 1408 (shared 1408), rotary 0.5, theta
// 1e6, vocab 151552, no --qk-layernorm (GLM-4.5 355B has it). Not re-verified:
// 128 experts, routed_scaling_factor 1.0. Types: Q4_K_M (e.g. unsloth's or
// bartowski's GLM-4.5-Air Q4_K_M): the 1408- and 10944-wide ffn_down rows are
// not multiples of 256, so they fall back to Q5_0 / Q8_0 (Q6_K blocks).
SynthConfig glm_45_air() {
  SynthConfig c;
  c.arch = "glm4moe";
  c.name = "sluice-synth-glm-4.5-air";
  c.n_layer = c.preset_layers = 46;
  c.n_nextn = 1;
  c.n_lead_dense = 1;
  c.n_expert = 128;
  c.n_expert_used = 8;
  c.n_expert_shared = 1;
  c.n_embd = 4096;
  c.n_ff = 10944;
  c.n_ff_exp = 1408;
  c.n_head = 96;
  c.n_head_kv = 8;
  c.head_dim = 128;
  c.n_rot = 64;
  c.qk_norm = false;
  c.n_vocab = 151552;
  c.context_length = 131072;
  c.rope_theta = 1e6f;
  c.rms_eps = 1e-5f;
  c.expert_weights_scale = 1.0f;
  set_q4_k_m(c);
  return c;
}

// gpt-oss-20b / -120b (openai/gpt-oss-* config.json). Types as ggml-org's
// gpt-oss-*-GGUF (mxfp4): MXFP4 experts; token_embd, output and attention
// Q8_0. No tensor listing of those files was found; a forum post reports
// Q8_0 embeddings, and Q8_0 for all three reproduces the tensor sizes
// llama-bench reports for them (59.02 GiB for 120b, 11.27 GiB for 20b; F16
// attention and embeddings would give ~61 GiB and ~13 GiB). F32 norms,
// biases, sinks and router, which llama-quantize never quantizes. (The golden
// gpt-oss file has F16 attention/embeddings instead: llama-quantize's F16
// override.)
SynthConfig gpt_oss(uint32_t n_layer, uint32_t n_expert, const char* name) {
  SynthConfig c;
  c.arch = "gpt-oss";
  c.name = name;
  c.n_layer = c.preset_layers = n_layer;
  c.n_expert = n_expert;
  c.n_expert_used = 4;
  c.n_embd = 2880;
  c.n_ff_exp = c.n_ff = 2880;
  c.n_head = 64;
  c.n_head_kv = 8;
  c.head_dim = 64;
  c.n_swa = 128;
  c.n_vocab = 201088;
  c.context_length = 131072;
  c.rope_theta = 150000.0f;
  c.rope_scaling_factor = 32.0f;
  c.rope_orig_ctx = 4096;
  c.rms_eps = 1e-5f;
  c.expert_type = c.down_type = GgmlType::MXFP4;
  c.attn_type = c.attn_v_type = c.embd_type = c.output_type = GgmlType::Q8_0;
  return c;
}

SynthConfig qwen3_30b_a3b() {
  SynthConfig c;
  c.name = "sluice-synth-qwen3-30b-a3b";
  c.n_layer = c.preset_layers = 48;
  c.n_expert = 128;
  c.n_expert_used = 8;
  c.n_embd = 2048;
  c.n_ff_exp = 768;
  c.n_ff = 6144;
  c.n_head = 32;
  c.n_head_kv = 4;
  c.head_dim = 128;
  c.n_vocab = 151936;
  c.context_length = 40960;
  c.rope_theta = 1e6f;
  c.rms_eps = 1e-6f;
  // Q4_K_M-like: Q4_K experts and q/k/o, Q6_K v and lm head, Q6_K embeddings.
  c.expert_type = GgmlType::Q4_K;
  c.down_type = GgmlType::Q4_K;
  c.attn_type = GgmlType::Q4_K;
  c.attn_v_type = GgmlType::Q6_K;
  c.embd_type = GgmlType::Q6_K;
  c.output_type = GgmlType::Q6_K;
  return c;
}

// Qwen3.6-35B-A3B (Qwen/Qwen3.6-35B-A3B; model card and HF transformers'
// qwen3_5_moe docs, found with the search tool): 40 layers, 10 x (3 gated
// DeltaNet + 1 gated attention), hidden 2048; DeltaNet 16 QK heads / 32 V
// heads of dim 128; attention 16 q / 2 kv heads of dim 256, rotary dim 64
// (partial_rotary_factor 0.25); 256 experts, 8 routed + 1 shared, expert and
// shared-expert FFN 512; vocab 248320 (padded); context 262144; one MTP
// layer (mtp_num_hidden_layers 1, written here only with n_nextn = 1).
// Not verified from the config.json itself: conv kernel 4 (Qwen3-Next's
// linear_conv_kernel_dim), rope theta 1e7 (as Qwen3.5-27B's rotary base),
// mrope sections [11, 11, 10] (as the dense Qwen3.5 GGUF's), rms eps 1e-6.
// Types: Q4_K_M (set_q4_k_m; the architecture adds attn_qkv Q5_K).
SynthConfig qwen36_35b_a3b() {
  SynthConfig c;
  c.arch = "qwen35moe";
  c.name = "sluice-synth-qwen3.6-35b-a3b";
  c.n_layer = c.preset_layers = 40;
  c.full_attention_interval = 4;
  c.n_nextn = 0;
  c.n_embd = 2048;
  c.ssm_conv_kernel = 4;
  c.ssm_state_size = 128;
  c.ssm_group_count = 16;
  c.ssm_time_step_rank = 32;
  c.n_head = 16;
  c.n_head_kv = 2;
  c.head_dim = 256;
  c.n_rot = 64;
  c.rope_sections = {11, 11, 10, 0};
  c.rope_theta = 1e7f;
  c.n_expert = 256;
  c.n_expert_used = 8;
  c.n_ff_exp = 512;
  c.n_ff_shexp = 512;
  c.n_vocab = 248320;
  c.context_length = 262144;
  c.rms_eps = 1e-6f;
  set_q4_k_m(c);
  return c;
}

// Qwen3.5-397B-A17B (Qwen/Qwen3.5-397B-A17B; release notes and model pages
// found with the search tool): 60 layers, 15 x (3 gated DeltaNet + 1 gated
// attention), hidden 4096; DeltaNet 16 QK heads / 64 V heads; attention 32 q
// / 2 kv heads of dim 256; 512 experts, 10 routed + 1 shared, expert FFN
// 1024; vocab 248320; context 262144; one MTP layer; rope theta 1e7. Not
// verified: DeltaNet head dim 128 and conv kernel 4 (as the 35B), shared
// expert FFN 1024 (one model page's "FFN intermediate size"), rotary dim 64
// and sections [11, 11, 10] (as the 35B). ~220 GB at Q4_K_M: use --layers /
// --zero-data on small disks.
SynthConfig qwen35_397b_a17b() {
  SynthConfig c = qwen36_35b_a3b();
  c.name = "sluice-synth-qwen3.5-397b-a17b";
  c.n_layer = c.preset_layers = 60;
  c.n_embd = 4096;
  c.ssm_time_step_rank = 64;
  c.n_head = 32;
  c.n_expert = 512;
  c.n_expert_used = 10;
  c.n_ff_exp = 1024;
  c.n_ff_shexp = 1024;
  return c;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& n : v) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

// Q4_K_M as llama-quantize assigns it without overrides (llama.cpp's
// src/llama-quant.cpp, llama_tensor_get_type, checked with the search tool):
// Q4_K by default; output.weight Q6_K; every tensor whose name contains
// "ffn_down" (dense, _exps, _shexp) Q6_K where use_more_bits(block, n_layer)
// holds, n_layer being block_count (NextN blocks included); attn_v.weight
// likewise by its index among the attn_v tensors (= the block); rows not a
// multiple of 256 fall back (Q4_K -> Q5_0, Q6_K -> Q8_0). token_embd stays
// Q4_K (its special cases are other ftypes'), except that a model without
// output.weight (tied embeddings) quantizes it as the output, Q6_K;
// attn_output/attn_k are raised
// only for 8-expert models; MLA's attn_k_b/attn_v_b and the NextN head's
// embed_tokens/shared_head_head match no rule. Norms, routers (ffn_gate_inp)
// and biases stay F32. This is the mix of plain llama-quantize Q4_K_M files
// (e.g. bartowski's); unsloth's "UD" dynamic files use other mixes.
void set_q4_k_m(SynthConfig& c, bool tied_embeddings) {
  c.expert_type = c.down_type = c.attn_type = c.attn_v_type = GgmlType::Q4_K;
  c.output_type = GgmlType::Q6_K;
  c.embd_type = tied_embeddings ? GgmlType::Q6_K : GgmlType::Q4_K;
  c.q4_k_m_more_bits = true;
}

std::vector<std::string> synth_preset_names() {
  return {"tiny", "qwen3-30b-a3b", "gpt-oss-20b", "gpt-oss-120b", "deepseek-v3", "kimi-k2", "glm-4.5-air",
          "qwen3.6-35b-a3b", "qwen3.5-397b-a17b", "deepseek-v4-flash", "glm-5", "gemma-4-26b-a4b",
          "lfm2-8b-a1b", "qwen2-57b-a14b", "ling-3.0-tiny"};
}

SynthConfig synth_preset(const std::string& preset, const std::string& arch) {
  if (!arch.empty()) {
    bool known = false;
    for (const auto& a : synth_arch_names()) known = known || a == arch;
    if (!known) fail("--arch", "unsupported architecture '" + arch + "' (supported: " + joined(synth_arch_names()) + ")");
  }
  if (preset == "tiny") return tiny(arch.empty() ? "qwen3moe" : arch);
  SynthConfig c;
  if (preset == "qwen3-30b-a3b") c = qwen3_30b_a3b();
  else if (preset == "gpt-oss-20b") c = gpt_oss(24, 32, "sluice-synth-gpt-oss-20b");
  else if (preset == "gpt-oss-120b") c = gpt_oss(36, 128, "sluice-synth-gpt-oss-120b");
  else if (preset == "deepseek-v3") c = deepseek_v3();
  else if (preset == "kimi-k2") c = kimi_k2();
  else if (preset == "glm-4.5-air") c = glm_45_air();
  else if (preset == "qwen3.6-35b-a3b") c = qwen36_35b_a3b();
  else if (preset == "qwen3.5-397b-a17b") c = qwen35_397b_a17b();
  else if (preset == "deepseek-v4-flash") c = deepseek_v4_flash();
  else if (preset == "glm-5") c = glm_5();
  else if (preset == "gemma-4-26b-a4b") c = gemma_4_26b_a4b();
  else if (preset == "lfm2-8b-a1b") c = lfm2_8b_a1b();
  else if (preset == "qwen2-57b-a14b") c = qwen2_57b_a14b();
  else if (preset == "ling-3.0-tiny") c = ling_30_tiny();
  else fail("--preset", "unknown preset '" + preset + "' (available: " + joined(synth_preset_names()) + ")");
  if (!arch.empty() && arch != c.arch)
    fail("--arch", "preset " + preset + " is a " + c.arch + " model; it cannot be written as " + arch);
  return c;
}

}  // namespace sluice::tools
