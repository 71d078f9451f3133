// deepseek4 (llama.cpp's src/models/deepseek4.cpp): DeepSeek V4 / V4-Flash.
// Every layer is BlockKind::Dsv4: hyper-connections around an attention
// sublayer (model/mixers/dsv4_attention.h: window + compressed blocks of the
// layer's compress ratio, the lightning indexer on ratio-4 layers, sinks,
// grouped output LoRA) and a MoE sublayer (sqrt-softplus scores; the first
// hash_layer_count layers pick experts by token id; clamped SwiGLU experts
// and shared expert). One trailing NextN/MTP block (nextn_predict_layers)
// is the --mtp head: a window-only block of the same kind whose hidden input
// and output are the hyper-connection streams (model/mtp_head.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/arch.h"
#include "model/arch/tensor_plan.h"
#include "util/error.h"

namespace sluice::model {
namespace {

// A per-layer float key that may also be one scalar (llama.cpp's get_key_or_arr).
std::vector<float> floats_per_layer(const ArchReader& r, const std::string& k, uint32_t n_layer,
                                    std::optional<std::vector<float>> fallback) {
  const gguf::Value* v = r.model().metadata().find(r.key(k));
  if (!v) {
    if (fallback) return *fallback;
    fail(r.file(), "missing metadata key " + r.key(k));
  }
  if (v->type != gguf::ValueType::ARRAY) return std::vector<float>(n_layer, r.f32(k));
  if (v->array.size() < n_layer)
    r.bad(k, "has " + std::to_string(v->array.size()) + " entries for " + std::to_string(n_layer) +
                 " layers");
  std::vector<float> out(n_layer);
  for (uint32_t il = 0; il < n_layer; ++il) {
    const gguf::Value& e = v->array[il];
    const double f = e.type == gguf::ValueType::FLOAT32 || e.type == gguf::ValueType::FLOAT64 ? e.f
                     : e.type == gguf::ValueType::INT32 || e.type == gguf::ValueType::INT64
                         ? static_cast<double>(e.i)
                         : static_cast<double>(e.u);
    if (!std::isfinite(f)) r.bad(k, "entry " + std::to_string(il) + " is not finite");
    out[il] = static_cast<float>(f);
  }
  return out;
}

std::vector<uint32_t> compress_ratios(const ArchReader& r, uint32_t n_layer) {
  const std::string k = "attention.compress_ratios";
  const gguf::Value* v = r.model().metadata().find(r.key(k));
  if (!v) fail(r.file(), "missing metadata key " + r.key(k));
  if (v->type != gguf::ValueType::ARRAY) r.bad(k, "must be an array (one ratio per block)");
  if (v->array.size() < n_layer)
    r.bad(k, "has " + std::to_string(v->array.size()) + " entries for " + std::to_string(n_layer) +
                 " layers");
  std::vector<uint32_t> out(n_layer);
  for (uint32_t il = 0; il < n_layer; ++il) {
    const gguf::Value& e = v->array[il];
    const int64_t x = e.type == gguf::ValueType::INT32 || e.type == gguf::ValueType::INT64
                          ? e.i
                          : static_cast<int64_t>(e.u);
    if (x != 0 && x != 4 && x != 128)
      r.bad(k, "entry " + std::to_string(il) + " is " + std::to_string(x) +
                   " (only 0, 4 and 128 are supported)");
    out[il] = static_cast<uint32_t>(x);
  }
  return out;
}

}  // namespace

ArchDesc describe_deepseek4(const ArchReader& r) {
  ArchDesc d;
  HParams& hp = d.hp = r.common();
  const uint32_t n_nextn = r.u32("nextn_predict_layers", 0);
  if (n_nextn >= hp.n_layer) r.bad("nextn_predict_layers", "must be less than block_count");
  if (n_nextn > 1) r.bad("nextn_predict_layers", "more than one NextN/MTP block is not supported (as llama.cpp)");
  const uint32_t n_all = hp.n_layer;
  hp.n_layer = n_all - n_nextn;

  if (hp.n_head_kv != 1) r.bad("attention.head_count_kv", "must be 1 (one K = V head)");
  if (hp.head_dim_v != hp.head_dim)
    r.bad("attention.value_length", "must equal attention.key_length (K = V)");
  if (!hp.is_moe()) r.bad("expert_count", "must be > 0 (every deepseek4 layer is MoE)");
  if (r.u32("expert_gating_func") != 4) r.bad("expert_gating_func", "must be 4 (sqrt-softplus)");
  Dsv4Params& x = hp.dsv4;
  x.hc_count = r.u32("hyper_connection.count");
  if (x.hc_count != 4) r.bad("hyper_connection.count", "must be 4 (as llama.cpp requires)");
  x.sinkhorn_iters = r.u32("hyper_connection.sinkhorn_iterations");
  if (x.sinkhorn_iters == 0 || x.sinkhorn_iters > 1000)
    r.bad("hyper_connection.sinkhorn_iterations", "must be in [1, 1000]");
  x.hc_eps = r.f32("hyper_connection.epsilon");
  if (!(x.hc_eps >= 0)) r.bad("hyper_connection.epsilon", "must be >= 0");
  x.q_lora_rank = r.u32("attention.q_lora_rank");
  if (x.q_lora_rank == 0 || x.q_lora_rank > (1u << 20))
    r.bad("attention.q_lora_rank", "must be in [1, 2^20]");
  x.o_groups = r.u32("attention.output_group_count");
  if (x.o_groups == 0 || hp.n_head % x.o_groups != 0)
    r.bad("attention.output_group_count",
          std::to_string(x.o_groups) + " must divide head_count " + std::to_string(hp.n_head));
  x.o_lora_rank = r.u32("attention.output_lora_rank");
  if (x.o_lora_rank == 0 || x.o_lora_rank > (1u << 20))
    r.bad("attention.output_lora_rank", "must be in [1, 2^20]");
  x.hash_layers = r.u32("hash_layer_count");
  if (x.hash_layers > hp.n_layer) r.bad("hash_layer_count", "exceeds the trunk's layers");

  // RoPE: window-only layers at rope.freq_base without scaling; compressed
  // layers at compress_rope_freq_base with the file's YaRN (magnitude 1).
  hp.rope.type = RopeType::Norm;
  x.compress_rope = hp.rope;
  hp.rope.yarn_factor = 0.0f;
  x.compress_rope.theta = r.f32("attention.compress_rope_freq_base");
  if (!(x.compress_rope.theta > 0)) r.bad("attention.compress_rope_freq_base", "must be > 0");
  if (x.compress_rope.yarn_factor > 0.0f)
    x.compress_rope.attn_factor = 1.0f / (1.0f + 0.1f * std::log(x.compress_rope.yarn_factor));

  DsaParams& ix = hp.dsa;
  ix.n_head = r.u32("attention.indexer.head_count");
  ix.head_dim = r.u32("attention.indexer.key_length");
  ix.top_k = r.u32("attention.indexer.top_k");
  if (ix.n_head == 0 || ix.n_head > 4096)
    r.bad("attention.indexer.head_count", "must be in [1, 4096]");
  if (ix.head_dim < hp.rope.n_rot || ix.head_dim > 65536 || ix.head_dim % 2 != 0)
    r.bad("attention.indexer.key_length", "must be even and in [rope.dimension_count, 65536]");
  if (ix.top_k == 0 || ix.top_k > (1u << 24))
    r.bad("attention.indexer.top_k", "must be in [1, 2^24]");

  const uint32_t window = r.u32("attention.sliding_window");
  if (window == 0) r.bad("attention.sliding_window", "must be > 0");
  const std::vector<uint32_t> ratios = compress_ratios(r, n_all);
  const std::vector<float> clamp = floats_per_layer(r, "swiglu_clamp_exp", n_all, std::nullopt);
  const std::vector<float> clamp_sh = floats_per_layer(r, "swiglu_clamp_shexp", n_all, clamp);
  const uint32_t n_shared = r.u32("expert_shared_count");
  if (n_shared == 0 || n_shared > 64) r.bad("expert_shared_count", "must be in [1, 64]");
  const float w_scale = r.f32("expert_weights_scale");
  const bool w_norm = r.flag("expert_weights_norm", false);

  d.tied_output = false;
  auto block = [&](uint32_t il) {
    LayerDesc l;
    l.block = BlockKind::Dsv4;
    l.attn.kind = AttentionKind::Dsv4;
    l.attn.sinks = Need::Required;
    l.attn.window = window;
    l.attn.compress_ratio = ratios[il];
    l.ffn.kind = FfnKind::Moe;
    l.ffn.act = Activation::SwiGluClamped;
    l.ffn.clamp = clamp[il];
    l.ffn.clamp_shexp = clamp_sh[il];
    l.ffn.shared_expert = true;
    l.ffn.n_ff = hp.n_ff_exp * n_shared;
    l.ffn.router.kind =
        il < x.hash_layers ? RouterKind::HashSqrtSoftplus : RouterKind::SqrtSoftplus;
    l.ffn.router.normalize = w_norm;
    l.ffn.router.weights_scale = w_scale;
    l.ffn.router.selection_bias = il < x.hash_layers ? Need::Absent : Need::Required;
    return l;
  };
  for (uint32_t il = 0; il < hp.n_layer; ++il) d.layers.push_back(block(il));
  // The NextN/MTP block (blk.<n_layer>): an ordinary block of this architecture
  // over the head's own rows, sliding window only, as llama.cpp's MTP graph
  // runs it (a plain sliding-window cache); loaded with --mtp, else ignored.
  for (uint32_t il = hp.n_layer; il < n_all; ++il) {
    if (ratios[il] != 0)
      r.bad("attention.compress_ratios", "entry " + std::to_string(il) + " (the NextN/MTP block) is " +
                                             std::to_string(ratios[il]) + ": MTP runs a sliding window only (0)");
    d.ignored.push_back("blk." + std::to_string(il) + ".*");
    d.nextn.push_back({il, block(il)});
  }
  return d;
}

// ---- the generator (sluice synth)

namespace {

// Fixed parts of a synthetic deepseek4 file (ArchSizes has no fields for
// them): 4 streams, 20 Sinkhorn rounds, SwiGLU clamp 10, compress RoPE base 160000 (as
// DeepSeek-V4-Flash). Without the dsv4_* sizes: 2 output groups of rank
// q_lora / 2 and compress ratios 4, 128, 0 repeating over the blocks.
constexpr uint32_t kHc = 4, kSinkhorn = 20;
constexpr uint32_t kRatios[] = {4, 128, 0};

std::vector<int32_t> block_ratios(const ArchSizes& cfg) {
  std::vector<int32_t> r;
  for (uint32_t l = 0; l < cfg.n_layer; ++l)
    r.push_back(cfg.dsv4_compress_ratios.empty() ? static_cast<int32_t>(kRatios[l % 3])
                                                 : cfg.dsv4_compress_ratios.at(l));
  return r;
}

// The keys and tensors of shared/golden/deepseek4-f32.gguf, shapes from the
// sizes; matrices in cfg.attn_type (experts cfg.expert_type), norms, the
// hyper-connection tensors and the compressors' ape F32, as llama.cpp's
// converter writes DeepSeek-V4.
void plan_deepseek4(const ArchSizes& cfg, PlanBuilder& p) {
  if (cfg.n_nextn > 1) fail("--nextn", "deepseek4 takes at most one NextN/MTP block (as llama.cpp)");
  if (cfg.n_expert == 0) fail("--experts", "deepseek4 needs experts (every layer is MoE)");
  const uint32_t groups = cfg.dsv4_o_groups ? cfg.dsv4_o_groups : 2;
  if (cfg.n_head % groups != 0)
    fail("--heads", "deepseek4's " + std::to_string(groups) + " output groups must divide the head count");
  if (!cfg.dsv4_compress_ratios.empty() && cfg.dsv4_compress_ratios.size() < cfg.n_layer)
    fail("--layers", "the preset's compress ratios cover " + std::to_string(cfg.dsv4_compress_ratios.size()) +
                         " blocks");
  std::vector<int32_t> ratios = block_ratios(cfg);
  const uint32_t n_blocks = cfg.n_layer + cfg.n_nextn;
  ratios.resize(n_blocks, 0);  // the NextN/MTP block: sliding window only
  if (cfg.q_lora_rank < 2) fail("--q-lora-rank", "deepseek4 needs a q LoRA (the indexer reads it)");
  const uint32_t n_rot = cfg.n_rot ? cfg.n_rot : cfg.head_dim;
  if (n_rot % 2 != 0 || n_rot > cfg.head_dim || n_rot > cfg.dsa_head_dim)
    fail("--head-dim", "deepseek4's rope dims must be even and fit the head and indexer dims");
  const std::string a = cfg.arch;
  p.general(cfg);
  p.md(a + ".block_count", gguf::Value::from_u32(n_blocks));
  if (cfg.n_nextn > 0) p.md(a + ".nextn_predict_layers", gguf::Value::from_u32(cfg.n_nextn));
  p.md(a + ".context_length", gguf::Value::from_u32(cfg.context_length));
  p.md(a + ".embedding_length", gguf::Value::from_u32(cfg.n_embd));
  p.md(a + ".feed_forward_length", gguf::Value::from_u32(cfg.n_ff_exp));
  p.md(a + ".attention.head_count", gguf::Value::from_u32(cfg.n_head));
  p.md(a + ".attention.head_count_kv", gguf::Value::from_u32(1));
  p.md(a + ".attention.key_length", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".attention.value_length", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(cfg.rms_eps));
  p.md(a + ".attention.q_lora_rank", gguf::Value::from_u32(cfg.q_lora_rank));
  p.md(a + ".attention.sliding_window", gguf::Value::from_u32(cfg.n_swa));
  p.md(a + ".attention.output_group_count", gguf::Value::from_u32(groups));
  const uint64_t R = cfg.dsv4_o_lora_rank ? cfg.dsv4_o_lora_rank : cfg.q_lora_rank / 2;
  p.md(a + ".attention.output_lora_rank", gguf::Value::from_u32(static_cast<uint32_t>(R)));
  p.md(a + ".attention.compress_ratios", gguf::Value::from_i32s(ratios));
  p.md(a + ".attention.compress_rope_freq_base", gguf::Value::from_f32(160000.0f));
  p.md(a + ".attention.indexer.head_count", gguf::Value::from_u32(cfg.dsa_n_head));
  p.md(a + ".attention.indexer.key_length", gguf::Value::from_u32(cfg.dsa_head_dim));
  p.md(a + ".attention.indexer.top_k", gguf::Value::from_u32(cfg.dsa_top_k));
  p.md(a + ".rope.dimension_count", gguf::Value::from_u32(n_rot));
  p.md(a + ".rope.freq_base", gguf::Value::from_f32(cfg.rope_theta));
  if (cfg.rope_scaling_factor > 1.0f) {
    p.md(a + ".rope.scaling.type", gguf::Value::from_string("yarn"));
    p.md(a + ".rope.scaling.factor", gguf::Value::from_f32(cfg.rope_scaling_factor));
    p.md(a + ".rope.scaling.original_context_length", gguf::Value::from_u32(cfg.rope_orig_ctx));
  }
  p.md(a + ".expert_count", gguf::Value::from_u32(cfg.n_expert));
  p.md(a + ".expert_used_count", gguf::Value::from_u32(cfg.n_expert_used));
  p.md(a + ".expert_feed_forward_length", gguf::Value::from_u32(cfg.n_ff_exp));
  p.md(a + ".expert_shared_count", gguf::Value::from_u32(cfg.n_expert_shared));
  p.md(a + ".expert_weights_scale", gguf::Value::from_f32(cfg.expert_weights_scale));
  p.md(a + ".expert_weights_norm", gguf::Value::from_bool(cfg.expert_weights_norm));
  p.md(a + ".expert_gating_func", gguf::Value::from_u32(4));
  p.md(a + ".swiglu_clamp_exp", gguf::Value::from_f32(10.0f));
  p.md(a + ".swiglu_clamp_shexp", gguf::Value::from_f32(10.0f));
  p.md(a + ".hyper_connection.count", gguf::Value::from_u32(kHc));
  p.md(a + ".hyper_connection.sinkhorn_iterations", gguf::Value::from_u32(kSinkhorn));
  p.md(a + ".hyper_connection.epsilon", gguf::Value::from_f32(1e-6f));
  const uint32_t n_hash = std::min(cfg.dsv4_hash_layers, cfg.n_layer);  // a --layers cut keeps the first blocks
  p.md(a + ".hash_layer_count", gguf::Value::from_u32(n_hash));
  p.file_type(cfg);
  const uint64_t V = p.tokenizer();

  const uint64_t E = cfg.n_embd, H = cfg.n_head, HD = cfg.head_dim, QR = cfg.q_lora_rank;
  const uint64_t IH = cfg.dsa_n_head, ID = cfg.dsa_head_dim, X = cfg.n_expert, F = cfg.n_ff_exp;
  const uint64_t FS = F * cfg.n_expert_shared, M = (2 + kHc) * kHc;
  const GgmlType f32 = GgmlType::F32, at = cfg.attn_type;
  auto mat = [&](const std::string& name, uint64_t n_in, uint64_t n_out, uint32_t l) {
    p.add(name, quantize_fallback(at, n_in), {n_in, n_out}, Init::Projection, l, "--dense-type");
  };
  p.add("token_embd.weight", quantize_fallback(cfg.embd_type, E), {E, V}, Init::Embedding, 0,
        "--embd-type");
  p.add("output_hc_fn.weight", f32, {kHc * E, kHc}, Init::Projection, 0, "--n-embd");
  p.add("output_hc_base.weight", f32, {kHc}, Init::Bias, 0, "--n-embd");
  p.add("output_hc_scale.weight", f32, {1}, Init::Norm, 0, "--n-embd");
  p.add("output_norm.weight", f32, {E}, Init::Norm, 0, "--n-embd");
  p.add("output.weight", quantize_fallback(cfg.output_type, E), {E, V}, Init::Projection, 0,
        "--dense-type");
  for (uint32_t l = 0; l < n_blocks; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const int32_t ratio = ratios[l];
    if (l >= cfg.n_layer) add_nextn(p, cfg, b, l, V, /*own_head=*/true);
    p.add(b + "attn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "attn_sinks.weight", f32, {H}, Init::Bias, l, "--heads");
    mat(b + "attn_q_a.weight", E, QR, l);
    p.add(b + "attn_q_a_norm.weight", f32, {QR}, Init::Norm, l, "--q-lora-rank");
    mat(b + "attn_q_b.weight", QR, H * HD, l);
    mat(b + "attn_kv.weight", E, HD, l);
    p.add(b + "attn_kv_a_norm.weight", f32, {HD}, Init::Norm, l, "--head-dim");
    mat(b + "attn_output_a.weight", H * HD / groups, R * groups, l);
    mat(b + "attn_output_b.weight", groups * R, E, l);
    for (const char* site : {"hc_attn", "hc_ffn"}) {
      p.add(b + site + "_fn.weight", f32, {kHc * E, M}, Init::Projection, l, "--n-embd");
      p.add(b + site + "_base.weight", f32, {M}, Init::Bias, l, "--n-embd");
      p.add(b + site + "_scale.weight", f32, {3}, Init::Norm, l, "--n-embd");
    }
    if (ratio != 0) {
      const uint64_t C = (ratio == 4 ? 2 : 1) * HD;
      mat(b + "attn_compressor_kv.weight", E, C, l);
      mat(b + "attn_compressor_gate.weight", E, C, l);
      p.add(b + "attn_compressor_ape.weight", f32, {C, static_cast<uint64_t>(ratio)}, Init::Bias, l, "--head-dim");
      p.add(b + "attn_compressor_norm.weight", f32, {HD}, Init::Norm, l, "--head-dim");
    }
    if (ratio == 4) {
      mat(b + "indexer.proj.weight", E, IH, l);
      mat(b + "indexer.attn_q_b.weight", QR, IH * ID, l);
      mat(b + "indexer_compressor_kv.weight", E, 2 * ID, l);
      mat(b + "indexer_compressor_gate.weight", E, 2 * ID, l);
      p.add(b + "indexer_compressor_ape.weight", f32, {2 * ID, 4}, Init::Bias, l, "--n-embd");
      p.add(b + "indexer_compressor_norm.weight", f32, {ID}, Init::Norm, l, "--n-embd");
    }
    p.add(b + "ffn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "ffn_gate_inp.weight", f32, {E, X}, Init::Router, l, "--experts");
    if (l < n_hash)  // token id -> its experts, instead of the score bias
      p.add(b + "ffn_gate_tid2eid.weight", GgmlType::I32, {cfg.n_expert_used, V}, Init::ExpertIds, l, "--experts");
    else
      p.add(b + "exp_probs_b.bias", f32, {X}, Init::Bias, l, "--experts");
    p.add(b + "ffn_gate_exps.weight", cfg.expert_type, {E, F, X}, Init::Projection, l, "--type");
    p.add(b + "ffn_up_exps.weight", cfg.expert_type, {E, F, X}, Init::Projection, l, "--type");
    p.add(b + "ffn_down_exps.weight", cfg.down_type, {F, E, X}, Init::Projection, l, "--type");
    mat(b + "ffn_gate_shexp.weight", E, FS, l);
    mat(b + "ffn_up_shexp.weight", E, FS, l);
    mat(b + "ffn_down_shexp.weight", FS, E, l);
  }
}

// The shapes of shared/golden/deepseek4-f32 (DeepSeek-V4-like, tiny), with
// expert FFN 32 so that every row fits the default Q4_0/Q8_0 blocks.
void tiny_deepseek4(ArchSizes& c) {
  c.n_layer = 3;
  c.n_embd = 128;
  c.n_head = 4;
  c.n_head_kv = 1;
  c.head_dim = 128;
  c.n_rot = 16;
  c.q_lora_rank = 64;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.n_ff_exp = 32;
  c.n_expert_shared = 1;
  c.expert_weights_scale = 1.5f;
  c.dsa_n_head = 16;
  c.dsa_head_dim = 64;
  c.dsa_top_k = 8;
  c.n_swa = 32;
  c.rope_theta = 10000.0f;
  c.rope_scaling_factor = 16.0f;
  c.rope_orig_ctx = 4096;
  c.rms_eps = 1e-6f;
  c.dsv4_hash_layers = 1;  // blk.0 routes by token id, as in shared/golden's deepseek4 cases
}

}  // namespace

extern const ArchSynth synth_deepseek4 = {plan_deepseek4, tiny_deepseek4};

}  // namespace sluice::model
