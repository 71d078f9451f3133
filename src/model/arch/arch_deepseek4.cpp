// deepseek4 (llama.cpp's src/models/deepseek4.cpp): DeepSeek V4 / V4-Flash.
// Every layer is BlockKind::Dsv4: hyper-connections around an attention
// sublayer (model/mixers/dsv4_attention.h: window + compressed blocks of the
// layer's compress ratio, the lightning indexer on ratio-4 layers, sinks,
// grouped output LoRA) and a MoE sublayer (sqrt-softplus scores; the first
// hash_layer_count layers pick experts by token id; clamped SwiGLU experts
// and shared expert). Trailing NextN/MTP blocks (nextn_predict_layers) are
// ignored: no MTP for deepseek4 yet.
#include <cmath>
#include <string>

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
  const uint32_t n_all = hp.n_layer;
  hp.n_layer = n_all - n_nextn;
  for (uint32_t il = hp.n_layer; il < n_all; ++il)
    d.ignored.push_back("blk." + std::to_string(il) + ".*");

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
  d.layers.resize(hp.n_layer);
  for (uint32_t il = 0; il < hp.n_layer; ++il) {
    LayerDesc& l = d.layers[il];
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
  }
  return d;
}

// ---- the generator (sluice synth)

namespace {

void plan_deepseek4(const ArchSizes&, PlanBuilder&) {
  throw Error(
      "--arch deepseek4: sluice synth cannot write deepseek4 files yet (loading and evaluating "
      "them works)");
}

void tiny_deepseek4(ArchSizes& cfg) { cfg.arch = "deepseek4"; }

}  // namespace

extern const ArchSynth synth_deepseek4 = {plan_deepseek4, tiny_deepseek4};

}  // namespace sluice::model
