#include "model/transformer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <unordered_set>

#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/binder.h"
#include "model/norm.h"
#include "model/packed_layout.h"
#include "moe/cache_budget.h"
#include "moe/prediction_order.h"
#include "util/clock.h"
#include "util/error.h"

namespace sluice::model {
namespace {

// Working memory besides the dense set, KV cache and expert cache: activations,
// logits and private expert buffers of a prefill batch. A fixed allowance; it
// only shapes --cache-mb auto.
constexpr uint64_t kScratchAllowance = uint64_t{64} << 20;

// Resolves the expert cache budget once, at load (see ModelConfig). `layers`
// holds every MoE layer's shape; decode micro-batch 1 sets the floor.
// `decode_prefetch`: the --prefetch depth in force at decode; the floor is what
// decode holds at once, the next layer's prefetch included.
uint64_t resolve_cache_bytes(const ModelConfig& cfg, std::span<const moe::MoeLayerShape> layers, uint64_t dense_bytes,
                             uint64_t kv_bytes, int decode_prefetch) {
  const auto say = [&cfg](const std::string& line) {
    if (cfg.log) cfg.log(line);
  };
  constexpr int kUbatch = 1;
  if (cfg.load_all) {
    if (cfg.cache_auto || cfg.cache_bytes > 0) say("cache: off (--load-all keeps every expert resident)");
    return 0;
  }
  uint64_t bytes = cfg.cache_bytes;
  if (cfg.cache_auto) {
    uint64_t all_experts = 0;
    for (const moe::MoeLayerShape& l : layers) all_experts += l.expert_bytes * static_cast<uint64_t>(l.n_expert);
    moe::AutoCacheInputs in;
    // MemAvailable was read before loading: the anon dense buffers were not yet
    // allocated, and mmap/warm dense pages are page cache (counted as
    // available) that must stay resident; either way the dense set comes off.
    in.dense_bytes = dense_bytes;
    in.kv_bytes = kv_bytes;
    in.scratch_bytes = kScratchAllowance;
    in.floor_bytes = std::max(moe::experts_in_flight_bytes(layers, kUbatch, decode_prefetch), cfg.cache_floor_bytes);
    in.ceil_bytes = cfg.cache_ceil_bytes > 0 ? std::min(cfg.cache_ceil_bytes, all_experts) : all_experts;
    const moe::AutoCacheBudget b = moe::auto_cache_budget(cfg.cache_meminfo, in);
    say("cache: " + b.how + " (dense " + (cfg.dense_mode == moe::DenseMode::Anon ? "anon buffers" : "page cache") +
        "; floor " + moe::format_mib(in.floor_bytes) + ", token demand " +
        moe::format_mib(moe::token_demand_bytes(layers)) + ")");
    bytes = b.bytes;
  } else if (bytes > 0) {
    moe::check_cache_floor(bytes, layers, kUbatch);
    const uint64_t floor = moe::experts_in_flight_bytes(layers, kUbatch, decode_prefetch);
    if (bytes < floor)
      throw Error("--cache-mb " + moe::format_mib(bytes) + " is below the floor of " + moe::format_mib(floor) +
                  " with --prefetch at decode (depth " + std::to_string(decode_prefetch) +
                  "): a layer's experts and the next layer's predicted ones are pinned at once; raise --cache-mb "
                  "or use --prefetch=prefill");
    say("cache: " + moe::format_mib(bytes) + " (--cache-mb; floor " + moe::format_mib(floor) + ", token demand " +
        moe::format_mib(moe::token_demand_bytes(layers)) + ")");
  }
  const std::string warning = moe::cache_demand_warning(bytes, layers);
  if (!warning.empty()) say("cache: warning: " + warning);
  return bytes;
}

}  // namespace

Transformer::Transformer(std::shared_ptr<const gguf::GgufModel> gguf, const ModelConfig& cfg, ArchDesc desc)
    : gguf_(std::move(gguf)),
      cfg_(cfg),
      desc_(std::move(desc)),
      hp_(desc_.hp),
      pool_(cfg.threads),
      rope_(desc_.hp.rope) {
  if (cfg.io_threads < 1)
    throw Error("--io-threads: must be >= 1 (got " + std::to_string(cfg.io_threads) + ")");
  if (cfg.n_ctx < 0) throw Error("-c: context size must be >= 0 (got " + std::to_string(cfg.n_ctx) + ")");
  if (cfg.ubatch < 1) throw Error("--ubatch: must be >= 1 (got " + std::to_string(cfg.ubatch) + ")");
  if (cfg.n_slots < 1 || cfg.n_slots > kMaxSlots)
    throw Error("--parallel: must be in [1, " + std::to_string(kMaxSlots) + "] (got " + std::to_string(cfg.n_slots) +
                ")");
  moe::validate_trim_config(cfg.trims);
  // Trims renormalise where the router's weights sum to 1 (the architecture's
  // rule, not the user's); every MoE layer of an architecture routes alike.
  for (const LayerDesc& l : desc_.layers)
    if (l.ffn.kind == FfnKind::Moe) cfg_.trims.normalize = trims_renormalize(l.ffn.router);
  if (hp_.is_moe())
    moe_k_ = moe::effective_top_k(cfg_.trims, static_cast<int>(hp_.n_expert_used), static_cast<int>(hp_.n_expert));
  for (const LayerDesc& l : desc_.layers) {
    const RouterDesc& r = l.ffn.router;
    if (l.ffn.kind != FfnKind::Moe || r.n_group == 0 || r.n_group_used == 0 || r.n_group_used >= r.n_group) continue;
    const uint64_t eligible = uint64_t{hp_.n_expert} / r.n_group * r.n_group_used;
    if (static_cast<uint64_t>(moe_k_) > eligible)
      throw Error("--moe-top-k: " + std::to_string(moe_k_) + " experts cannot be chosen from the " +
                  std::to_string(eligible) + " experts of the " + std::to_string(r.n_group_used) +
                  " expert groups this model routes within");
  }
  const int n_ctx = resolve_context(cfg.n_ctx, hp_.n_ctx_train);
  if (cfg.log && hp_.n_ctx_train > 0 && static_cast<uint32_t>(n_ctx) > hp_.n_ctx_train)
    cfg.log("sluice: warning: -c " + std::to_string(n_ctx) + " is above the " + std::to_string(hp_.n_ctx_train) +
            " positions this model was trained on; text past them may degrade");
  // The model state is sized by -c (state_spec.h, the rule inspect reports
  // too): refuse before allocating what cannot fit. The NextN head's rows
  // count when it is loaded.
  const std::vector<LayerStateSpec> specs = model_state_specs(desc_, n_ctx);
  std::vector<LayerStateSpec> all_specs = specs;
  if (cfg.mtp && !desc_.nextn.empty()) all_specs.push_back(layer_state_spec(desc_.nextn.front().block, hp_, n_ctx));
  // Every slot holds a trunk state of its own (the NextN head's is slot 0's).
  std::optional<StateBytes> need = model::state_bytes(all_specs, cfg.kv_type);
  const std::optional<StateBytes> slot_need = model::state_bytes(specs, cfg.kv_type);
  const uint64_t n_extra = static_cast<uint64_t>(cfg.n_slots - 1);
  if (need && slot_need && slot_need->total() <= (std::numeric_limits<uint64_t>::max() - need->total()) / 64) {
    need->kv += n_extra * slot_need->kv;
    need->recurrent += n_extra * slot_need->recurrent;
  } else {
    need.reset();
  }
  if (!need || (cfg.memory_bytes > 0 && need->total() > cfg.memory_bytes)) {
    uint64_t kv_values = 0;  // per position, over every KV layer
    int kv_layers = 0;
    for (const LayerStateSpec& l : all_specs)
      if (l.kind == StateKind::KvRows) kv_values += static_cast<uint64_t>(l.kv.k_dim() + l.kv.v_dim()), ++kv_layers;
    throw Error("-c " + std::to_string(n_ctx) + ": the model state would need " +
                (need ? moe::format_mib(need->total()) : std::string("more than 2^64 bytes")) + " (KV rows: " +
                std::to_string(kv_layers) + " layers x " + std::to_string(n_ctx) + " positions, " +
                std::to_string(kv_values) + " " + kv_type_name(cfg.kv_type) + " values per position" +
                (need && need->recurrent ? "; recurrent state " + moe::format_mib(need->recurrent) : "") +
                ")" + (cfg.n_slots > 1 ? " for " + std::to_string(cfg.n_slots) + " slots (--parallel)" : std::string()) +
                ", more than the " + moe::format_mib(cfg.memory_bytes) + " of memory available; lower -c" +
                (cfg.n_slots > 1 ? " or --parallel" : ""));
  }

  moe::DenseConfig dc;
  dc.mode = cfg.dense_mode;
  dc.odirect = cfg.odirect;
  dc.on_progress = cfg.on_dense_progress;
  dc.wrap_file = cfg.wrap_dense_file;
  // Where every expert's bytes are, in either file layout (validated).
  // --mtp: the first NextN head is loaded as block n_layer (its tensors are
  // otherwise ignored), with its own one-layer KV cache.
  if (cfg.mtp) {
    if (desc_.nextn.empty())
      fail(gguf_->paths().front(), "--mtp: this " + hp_.arch +
                                       " file has no NextN/MTP block (nextn_predict_layers is 0 or absent)");
    if (desc_.nextn.front().layer != hp_.n_layer)
      fail(gguf_->paths().front(), "--mtp: the NextN block is blk." + std::to_string(desc_.nextn.front().layer) +
                                       ", expected blk." + std::to_string(hp_.n_layer) + " right after the trunk");
    mtp_layer_ = static_cast<int>(hp_.n_layer);
  }
  const size_t n_blocks = hp_.n_layer + (mtp_layer_ >= 0 ? 1 : 0);
  std::vector<gguf::LayerExpertParts> experts;
  if (hp_.is_moe()) {
    experts = gguf::layer_expert_parts(*gguf_);
    experts.resize(n_blocks);
  }
  // Streamed experts and tensors the architecture ignores (e.g. a NextN block) are not loaded.
  const std::string head_prefix = "blk." + std::to_string(mtp_layer_) + ".";
  dense_ = std::make_unique<moe::DenseWeights>(*gguf_, dc, [&](const gguf::TensorInfo& t) {
    return gguf::is_expert_weight(t) ||
           (desc_.ignores(t.name) && !(mtp_layer_ >= 0 && t.name.rfind(head_prefix, 0) == 0));
  });
  bind_weights(experts);
  try {
    state_ = std::make_unique<ModelState>(specs, cfg.kv_type, n_ctx);
    for (int i = 1; i < cfg.n_slots; ++i) extra_slots_.push_back(std::make_unique<ModelState>(specs, cfg.kv_type, n_ctx));
    if (mtp_layer_ >= 0)
      mtp_state_ = std::make_unique<ModelState>(std::vector<LayerStateSpec>{all_specs.back()}, cfg.kv_type, n_ctx);
  } catch (const std::bad_alloc&) {
    throw Error("-c " + std::to_string(n_ctx) + ": could not allocate the model state (" +
                moe::format_mib(need->total()) + "); lower -c");
  }
  prefetch_setting_ = resolve_prefetch();
  if (hp_.is_moe()) {
    moe::ExpertStoreConfig sc;
    sc.odirect = cfg.odirect;
    sc.io_threads = cfg.io_threads;
    sc.io_engine = cfg.io_engine;
    sc.io_depth = cfg.io_depth;
    sc.load_all = cfg.load_all;
    sc.wrap_file = cfg.wrap_expert_file;
    if (cfg.resident_layout == ResidentLayout::Packed) {
      std::vector<FfnMatrices> shapes(layers_.size());
      for (size_t l = 0; l < layers_.size(); ++l)
        if (layers_[l].moe) shapes[l] = layers_[l].experts.m;
      sc.on_resident = expert_packer(std::move(shapes));  // null when no expert type is packable
    }
    const std::vector<moe::MoeLayerShape> shapes =
        moe::moe_layer_shapes(experts, static_cast<int>(hp_.n_expert_used));
    sc.cache_bytes = resolve_cache_bytes(cfg, shapes, dense_->bytes(), state_bytes().total(),
                                         prefetch_depth_for_batch(prefetch_setting_, moe_k_, 1));
    // Resident experts (cache on or --load-all) are packed as they arrive;
    // streamed ones only where a fetch asks (kMinUsesToPackStreamed).
    experts_packed_ = sc.on_resident && (sc.load_all || sc.cache_bytes > 0);
    store_ = std::make_unique<moe::ExpertStore>(*gguf_, std::move(experts), sc);
  }
  if (cfg.route_replay) {
    if (!hp_.is_moe())
      throw Error("--route-replay " + cfg.route_replay->source + ": " + hp_.arch +
                  " is a dense model; there is no expert routing to replay");
    replay_ = std::make_unique<moe::RouteReplay>(*cfg.route_replay, static_cast<int>(hp_.n_expert), moe_k_);
    if (cfg.log) cfg.log(replay_->describe());
  }
}

Transformer::~Transformer() = default;

void Transformer::bind_weights(const std::vector<gguf::LayerExpertParts>& experts) {
  Binder b(*gguf_, *dense_, cfg_.resident_layout == ResidentLayout::Packed, &pool_);
  const uint64_t n_embd = hp_.n_embd;
  const std::string file = gguf_->paths().front();
  token_embd_ = &b.rows("token_embd.weight", {n_embd, hp_.n_vocab});
  if (!kernels::is_supported(token_embd_->type))
    throw Error("unsupported tensor type " + std::string(ggml_type_name(token_embd_->type)) +
                " in tensor token_embd.weight");
  token_embd_data_ = static_cast<const uint8_t*>(dense_->data(*token_embd_));
  output_norm_ = b.vector("output_norm.weight", n_embd);
  // Tied embeddings: no output.weight means the lm head reuses token_embd.
  if (!b.find("output.weight") && !desc_.tied_output) fail(file, "missing tensor output.weight");
  output_ = b.find("output.weight") ? b.matrix("output.weight", n_embd, hp_.n_vocab)
                                    : b.matrix("token_embd.weight", n_embd, hp_.n_vocab);

  layers_.resize(hp_.n_layer + (mtp_layer_ >= 0 ? 1 : 0));
  for (uint32_t il = 0; il < hp_.n_layer; ++il) bind_layer(b, il, desc_.layers[il], experts);
  if (mtp_layer_ >= 0) bind_mtp_head(b, experts);

  // Every tensor must be used or knowingly ignored: a tensor nothing claims
  // means the file is not what its architecture says (or sluice would
  // silently compute something else).
  for (const gguf::TensorInfo& t : gguf_->tensors()) {
    if (b.claimed(t.name) || desc_.ignores(t.name)) continue;
    if (const auto e = gguf::parse_expert_tensor_name(t.name);
        e && e->layer < layers_.size() && layers_[e->layer].moe)
      continue;  // a routed-expert weight of a MoE layer (bound through `experts`)
    fail(file, "tensor " + t.name + " is not used by architecture " + hp_.arch +
                   " (no block of this layer takes it); the file does not match its general.architecture");
  }
  dense_packed_bytes_ = b.packed_bytes();
}

void Transformer::bind_layer(Binder& b, uint32_t il, const LayerDesc& d,
                             const std::vector<gguf::LayerExpertParts>& experts) {
  const uint64_t n_embd = hp_.n_embd;
  const std::string file = gguf_->paths().front();
  Layer& L = layers_[il];
  L.desc = &d;
  const std::string p = "blk." + std::to_string(il) + ".";
  L.attn_norm = b.vector(p + "attn_norm.weight", n_embd);
  L.ffn_norm = b.vector(p + d.ffn_norm + ".weight", n_embd);
  // The token mixer (its own file under mixers/, with its state), then what
  // every attention mixer shares: the output bias and the sinks.
  if (d.attn.kind == AttentionKind::Mla) {
    L.mla = bind_mla(b, p, hp_);
    if (d.attn.indexer == DsaIndexer::Full) L.dsa = bind_dsa_indexer(b, p, hp_);
  } else if (d.attn.kind == AttentionKind::DeltaNet) {
    L.dn = bind_deltanet(b, p, hp_);
  } else {
    L.gqa = bind_gqa(b, p, d.attn, hp_);
  }
  L.bo = b.vector_if(d.attn.o_bias, p + "attn_output.bias", {n_embd});
  L.sinks = b.vector_if(d.attn.sinks, p + "attn_sinks.weight", {hp_.n_head});
  L.moe = d.ffn.kind == FfnKind::Moe;
  if (!L.moe) {
    L.dense.gate = b.matrix(p + "ffn_gate.weight", n_embd, d.ffn.n_ff);
    L.dense.up = b.matrix(p + "ffn_up.weight", n_embd, d.ffn.n_ff);
    L.dense.down = b.matrix(p + "ffn_down.weight", d.ffn.n_ff, n_embd);
    return;
  }
  const RouterDesc& r = d.ffn.router;
  const uint64_t n_expert = hp_.n_expert;
  L.router = b.matrix(p + "ffn_gate_inp.weight", n_embd, n_expert);
  L.router_bias = b.vector_if(r.logit_bias, p + "ffn_gate_inp.bias", {n_expert});
  L.selection_bias = b.vector_if(r.selection_bias, p + "exp_probs_b.bias", {n_expert});
  const gguf::LayerExpertParts& lp = experts.at(il);
  if (!lp.present())
    fail(file, "missing tensor " + gguf::stacked_expert_name(il, gguf::kGate) + " (layer " + std::to_string(il) +
                   " of this MoE model has no expert tensors)");
  if (lp.n_expert() != n_expert)
    throw Error("tensor " + lp.part[gguf::kGate].tensor + ": layer " + std::to_string(il) + " has " +
                std::to_string(lp.n_expert()) + " experts, expected " + std::to_string(n_expert));
  ExpertTemplate& x = L.experts;
  x.m.gate = b.expert(lp, gguf::kGate, n_embd, hp_.n_ff_exp);
  x.m.up = b.expert(lp, gguf::kUp, n_embd, hp_.n_ff_exp);
  x.m.down = b.expert(lp, gguf::kDown, hp_.n_ff_exp, n_embd);
  x.act = d.ffn.act;
  x.weights_scale = r.weights_scale;
  x.gate_bias = b.vector_if(d.ffn.expert_biases, p + "ffn_gate_exps.bias", {hp_.n_ff_exp, n_expert});
  x.up_bias = b.vector_if(d.ffn.expert_biases, p + "ffn_up_exps.bias", {hp_.n_ff_exp, n_expert});
  x.down_bias = b.vector_if(d.ffn.expert_biases, p + "ffn_down_exps.bias", {n_embd, n_expert});
  L.shared = d.ffn.shared_expert;
  if (L.shared) {
    L.shexp.gate = b.matrix(p + "ffn_gate_shexp.weight", n_embd, d.ffn.n_ff);
    L.shexp.up = b.matrix(p + "ffn_up_shexp.weight", n_embd, d.ffn.n_ff);
    L.shexp.down = b.matrix(p + "ffn_down_shexp.weight", d.ffn.n_ff, n_embd);
    if (d.ffn.shared_gate) L.shexp_gate = b.vector(p + "ffn_gate_inp_shexp.weight", n_embd);
  }
}

void Transformer::bind_mtp_head(Binder& b, const std::vector<gguf::LayerExpertParts>& experts) {
  const uint32_t il = static_cast<uint32_t>(mtp_layer_);
  bind_layer(b, il, desc_.nextn.front().block, experts);
  const uint64_t n_embd = hp_.n_embd;
  const std::string p = "blk." + std::to_string(il) + ".nextn.";
  head_.eh_proj = b.matrix(p + "eh_proj.weight", 2 * n_embd, n_embd);
  head_.enorm = b.vector(p + "enorm.weight", n_embd);
  head_.hnorm = b.vector(p + "hnorm.weight", n_embd);
  head_.norm = b.find(p + "shared_head_norm.weight") ? b.vector(p + "shared_head_norm.weight", n_embd) : output_norm_;
  head_.lm = b.find(p + "shared_head_head.weight") ? b.matrix(p + "shared_head_head.weight", n_embd, hp_.n_vocab)
                                                   : output_;
  head_.embd = token_embd_;
  if (b.find(p + "embed_tokens.weight")) {
    head_.embd = &b.rows(p + "embed_tokens.weight", {n_embd, hp_.n_vocab});
    if (!kernels::is_supported(head_.embd->type))
      throw Error("unsupported tensor type " + std::string(ggml_type_name(head_.embd->type)) + " in tensor " + p +
                  "embed_tokens.weight");
  }
  head_.embd_data = static_cast<const uint8_t*>(dense_->data(*head_.embd));
}

ModelStats Transformer::stats() const {
  ModelStats s;
  s.tokens_evaluated = tokens_evaluated_;
  s.dense_bytes = dense_->bytes();
  if (store_) s.io = store_->stats();
  s.experts = moe_ffn_.counters();
  s.time.eval_s = eval_s_;
  s.time.attention_s = attention_s_;
  s.time.expert_io_s = moe_ffn_.io_seconds();
  s.time.expert_matmul_s = moe_ffn_.matmul_seconds();
  s.trims = trim_stats_;
  s.expert_budget = cfg_.trims.expert_budget;
  s.prefetch = prefetch_depth_for_batch(prefetch_setting_, moe_k_, 1);
  s.prefill_prefetch = prefetch_depth_for_batch(prefetch_setting_, moe_k_, 2);
  s.prefetch_counters = moe_ffn_.prefetch_counters();
  s.batch = batch_;
  if (replay_) s.route_replay = replay_->describe();
  s.resident_layout = cfg_.resident_layout;
  s.dense_packed_bytes = dense_packed_bytes_;
  s.experts_packed = experts_packed_;
  return s;
}

uint64_t Transformer::expert_bytes(int layer) const {
  if (!store_ || layer < 0 || layer >= static_cast<int>(layers_.size()) || !layers_[layer].moe) return 0;
  return store_->expert_bytes(layer);
}

double Transformer::dense_resident_fraction() const { return dense_->resident_fraction(); }

moe::ExpertUsage Transformer::expert_usage() const {
  moe::ExpertUsage u;
  if (!hp_.is_moe()) return u;
  u.n_layer = static_cast<int>(hp_.n_layer);
  u.n_expert = static_cast<int>(hp_.n_expert);
  u.tokens = tokens_evaluated_;
  u.counts = usage_;
  u.counts.resize(static_cast<size_t>(u.n_layer) * static_cast<size_t>(u.n_expert), 0);
  return u;
}

void Transformer::eval(std::span<const int32_t> tokens, int pos0, float* logits_out) {
  run(tokens, pos0, logits_out, true);
}

void Transformer::eval_last(std::span<const int32_t> tokens, int pos0, float* logits_out) {
  run(tokens, pos0, logits_out, false);
}

void Transformer::eval_hidden(std::span<const int32_t> tokens, int pos0, float* logits_out, float* hidden_out,
                              bool all_rows) {
  run(tokens, pos0, logits_out, all_rows, hidden_out);
}

StateBytes Transformer::state_bytes() const {
  StateBytes b = state_->bytes();
  for (const auto& st : extra_slots_) {
    b.kv += st->bytes().kv;
    b.recurrent += st->bytes().recurrent;
    b.indexer += st->bytes().indexer;
  }
  if (mtp_state_) {
    b.kv += mtp_state_->bytes().kv;
    b.recurrent += mtp_state_->bytes().recurrent;
    b.indexer += mtp_state_->bytes().indexer;
  }
  return b;
}

void Transformer::mtp_truncate(int n) {
  if (!mtp_state_) throw Error("mtp_truncate: the model was loaded without its MTP head (--mtp)");
  mtp_state_->truncate(n);  // KV rows only: exact
}

void Transformer::check_eval(std::span<const int32_t> tokens, int pos0, const ModelState& st, const char* what) const {
  const int T = static_cast<int>(tokens.size());
  if (pos0 != st.n_past())
    throw Error(std::string(what) + " at position " + std::to_string(pos0) + " but the " +
                (&st == mtp_state_.get() ? "NextN head's state" : "model state") + " holds " +
                std::to_string(st.n_past()) + " positions (eval only appends: truncate first)");
  for (int32_t id : tokens)
    if (id < 0 || static_cast<uint32_t>(id) >= hp_.n_vocab)
      throw Error("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(hp_.n_vocab) + ")");
  if (static_cast<int64_t>(pos0) + T > st.n_ctx())
    throw Error("context full: " + std::to_string(pos0 + T) + " positions needed, context size is " +
                std::to_string(st.n_ctx()) + " (raise -c)");
}

void Transformer::run(std::span<const int32_t> tokens, int pos0, float* logits_out, bool all_rows,
                      float* hidden_out) {
  const int T = static_cast<int>(tokens.size());
  if (T == 0) return;
  const auto t_eval = std::chrono::steady_clock::now();
  check_eval(tokens, pos0, *state_, "eval");

  // Ubatches of cfg_.ubatch positions. Every op is row-independent except
  // attention (which reads earlier positions from the KV cache either way) and
  // the expert budget (per ubatch by definition), so without the budget the
  // logits do not depend on the ubatch size.
  const int64_t n_vocab = hp_.n_vocab;
  const int S = cfg_.ubatch;
  try {
    for (int c0 = 0; c0 < T; c0 += S) {
      const int n = std::min(S, T - c0);
      const bool last = c0 + n == T;
      float* hidden = hidden_out ? hidden_out + static_cast<int64_t>(c0) * hp_.n_embd : nullptr;
      if (!all_rows && !last) {
        run_ubatch(tokens.subspan(c0, n), pos0 + c0, n, nullptr, hidden);  // no logits wanted
      } else if (all_rows) {
        run_ubatch(tokens.subspan(c0, n), pos0 + c0, 0, logits_out + c0 * n_vocab, hidden);
      } else {
        run_ubatch(tokens.subspan(c0, n), pos0 + c0, n - 1, logits_out, hidden);
      }
    }
  } catch (...) {
    prefetch_.reset();  // waits for its reads in flight, frees its slots
    // The new positions are incomplete: drop them all (the contract: the
    // state keeps [0, pos0), or less where a recurrent layer fell back).
    state_->abort_append();
    if (state_->n_past() > pos0) state_->truncate(pos0);
    eval_s_ += seconds_since(t_eval);  // keeps TimeProfile's parts within eval_s
    throw;
  }
  eval_s_ += seconds_since(t_eval);
}

void Transformer::run_ubatch(std::span<const int32_t> tokens, int pos0, int first_row, float* logits_out,
                             float* hidden_out) {
  const int T = static_cast<int>(tokens.size());
  const int64_t n_embd = hp_.n_embd;
  x_.resize(static_cast<size_t>(T) * n_embd);
  for (int t = 0; t < T; ++t) embed_row(tokens[t], t);
  state_->begin_append(T);
  const RowSegment seg{0, T, pos0, state_.get()};
  run_trunk(T, {&seg, 1});
  state_->commit_append();

  const int n_out = T - first_row;
  if (hidden_out) {
    // Every row's state after output_norm (rows are independent: the logits'
    // rows are the same values either way).
    rms_norm_rows(x_.data(), output_norm_, T, n_embd, hp_.rms_eps, hidden_out);
    if (n_out > 0) matmul_f32(output_, hidden_out + static_cast<int64_t>(first_row) * n_embd, n_out, logits_out, pool_, act_);
  } else if (n_out > 0) {
    rms_norm_rows(&x_[static_cast<size_t>(first_row) * n_embd], output_norm_, n_out, n_embd, hp_.rms_eps,
                  xn_.data());
    matmul_f32(output_, xn_.data(), n_out, logits_out, pool_, act_);
  }
  tokens_evaluated_ += static_cast<uint64_t>(T);
}

void Transformer::mtp_eval(std::span<const int32_t> tokens, const float* hidden, int pos0, float* logits_out,
                           float* g_out, bool all_rows) {
  if (mtp_layer_ < 0) throw Error("mtp_eval: the model was loaded without its MTP head (--mtp)");
  const int T = static_cast<int>(tokens.size());
  if (T == 0) return;
  const auto t_eval = std::chrono::steady_clock::now();
  check_eval(tokens, pos0, *mtp_state_, "mtp_eval");
  const int64_t n_vocab = hp_.n_vocab, n_embd = hp_.n_embd;
  const int S = cfg_.ubatch;
  try {
    for (int c0 = 0; c0 < T; c0 += S) {
      const int n = std::min(S, T - c0);
      const bool last = c0 + n == T;
      const int first_row = all_rows ? 0 : (last ? n - 1 : n);
      float* logits = all_rows ? logits_out + c0 * n_vocab : logits_out;
      mtp_ubatch(tokens.subspan(c0, n), hidden + c0 * n_embd, pos0 + c0, first_row, logits,
                 g_out ? g_out + c0 * n_embd : nullptr);
    }
  } catch (...) {
    mtp_state_->abort_append();
    if (mtp_state_->n_past() > pos0) mtp_state_->truncate(pos0);
    eval_s_ += seconds_since(t_eval);
    throw;
  }
  eval_s_ += seconds_since(t_eval);
}

void Transformer::mtp_ubatch(std::span<const int32_t> tokens, const float* hidden, int pos0, int first_row,
                             float* logits_out, float* g_out) {
  const int T = static_cast<int>(tokens.size());
  const int64_t n_embd = hp_.n_embd;
  const float eps = hp_.rms_eps;
  x_.resize(static_cast<size_t>(T) * n_embd);
  xn_.resize(x_.size());
  tmp_.resize(x_.size());
  // x = eh_proj . [norm(embed(t)) * enorm, norm(h) * hnorm] (embedding first).
  mtp_cat_.resize(static_cast<size_t>(T) * 2 * n_embd);
  for (int t = 0; t < T; ++t) {
    float* cat = &mtp_cat_[static_cast<size_t>(t) * 2 * n_embd];
    kernels::dequantize_row(head_.embd->type, head_.embd_data + head_.embd->row_bytes() * tokens[t], cat, n_embd);
    rms_norm(cat, head_.enorm, n_embd, eps, cat);
    rms_norm(hidden + static_cast<int64_t>(t) * n_embd, head_.hnorm, n_embd, eps, cat + n_embd);
  }
  matmul_f32(head_.eh_proj, mtp_cat_.data(), T, x_.data(), pool_, act_);
  mtp_state_->begin_append(T);
  const RowSegment seg{0, T, pos0, mtp_state_.get()};
  forward_layer(mtp_layer_, T, {&seg, 1}, 0);
  prefetch_.reset();
  mtp_state_->commit_append();
  float* g = g_out ? g_out : xn_.data();
  rms_norm_rows(x_.data(), head_.norm, T, n_embd, eps, g);
  if (T > first_row)
    matmul_f32(head_.lm, g + static_cast<int64_t>(first_row) * n_embd, T - first_row, logits_out, pool_, act_);
}

void Transformer::router_logits(const Layer& L, const float* xn, int T, std::vector<float>& logits) {
  const int64_t n_expert = hp_.n_expert;
  logits.resize(static_cast<size_t>(T) * n_expert);
  matmul_f32(L.router, xn, T, logits.data(), pool_, act_);
  if (L.router_bias)
    for (int t = 0; t < T; ++t) kernels::ops().add(&logits[static_cast<size_t>(t) * n_expert], L.router_bias, n_expert);
}

void Transformer::dense_ffn(const FfnMatrices& m, Activation act, int T, float* out) {
  const int64_t n_embd = hp_.n_embd;
  QuantizedRows& gate_act = act_;
  gate_act.quantize(m.gate.kern->vec_dot_type, xn_.data(), T, n_embd, n_embd, &pool_);
  std::vector<const void*> rows_gate(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) rows_gate[t] = gate_act.row(t);
  QuantizedRows up_act;
  std::vector<const void*> rows_up = rows_gate;
  if (m.up.kern->vec_dot_type != m.gate.kern->vec_dot_type) {
    up_act.quantize(m.up.kern->vec_dot_type, xn_.data(), T, n_embd, n_embd, &pool_);
    for (int t = 0; t < T; ++t) rows_up[t] = up_act.row(t);
  }
  swiglu_.run(m, act, FfnBiases{}, rows_gate, rows_up, out, n_embd, pool_);
}

void Transformer::forward_layer(int il, int T, std::span<const RowSegment> segs, int st_layer) {
  const Layer& L = layers_[il];
  const LayerDesc& d = *L.desc;
  const int64_t n_embd = hp_.n_embd;
  const float eps = hp_.rms_eps;
  const kernels::OpsKernels& ops = kernels::ops();
  // Adds a bias of n floats to each of T rows of n.
  auto add_rows = [&](float* x, const float* bias, int64_t n) {
    if (bias)
      for (int t = 0; t < T; ++t) ops.add(x + static_cast<int64_t>(t) * n, bias, n);
  };

  // Attention block: the mixer leaves the output projection's result in tmp_.
  const auto t_attn = std::chrono::steady_clock::now();
  rms_norm_rows(x_.data(), L.attn_norm, T, n_embd, eps, xn_.data());
  for (const RowSegment& sg : segs) {  // each sequence's mixer on its own state
    const float* xn = xn_.data() + static_cast<int64_t>(sg.row0) * n_embd;
    float* out = tmp_.data() + static_cast<int64_t>(sg.row0) * n_embd;
    ModelState& st = *sg.st;
    if (d.attn.kind == AttentionKind::Mla && d.attn.indexer != DsaIndexer::None) {
      dsa_.run(L.mla, &L.dsa, d.attn.indexer, hp_.attn_scale, hp_, xn, sg.n, sg.pos0, sg.row0, il, st.kv(st_layer),
               rope_, act_, pool_, out);
    } else if (d.attn.kind == AttentionKind::Mla) {
      const AttentionOptions opt{d.attn.window, L.sinks, hp_.attn_scale, true};
      mla_.run(L.mla, opt, hp_, xn, sg.n, sg.pos0, il, st.kv(st_layer), rope_, act_, pool_, out);
    } else if (d.attn.kind == AttentionKind::DeltaNet) {
      RecurrentState& rs = st.recurrent(st_layer);
      deltanet_.run(L.dn, hp_, xn, sg.n, {rs.conv(), rs.matrices()}, out, pool_, act_);
    } else {
      const AttentionOptions opt{d.attn.window, L.sinks, hp_.attn_scale, false};
      gqa_.run(L.gqa, opt, hp_, xn, sg.n, sg.pos0, il, st.kv(st_layer), rope_, act_, pool_, out);
    }
  }
  add_rows(tmp_.data(), L.bo, n_embd);
  for (size_t i = 0; i < x_.size(); ++i) x_[i] += tmp_[i];
  attention_s_ += seconds_since(t_attn);

  // FFN block.
  rms_norm_rows(x_.data(), L.ffn_norm, T, n_embd, eps, xn_.data());
  if (L.moe) {
    router_logits(L, xn_.data(), T, router_logits_);
    const moe::ExpertStore& store = *store_;
    const moe::ExpertCachedFn is_cached = [&store, il](int32_t e) { return store.is_cached(il, e); };
    if (replay_) {
      // The router still runs (its cost is part of a layer's compute); the
      // trace decides. Token numbering ignores pos0, so a rewound or reset
      // session replays new trace tokens, as a new request would route anew.
      routing_.n_tokens = T;
      routing_.k = moe_k_;
      routing_.experts.resize(static_cast<size_t>(T) * moe_k_);
      routing_.weights.resize(routing_.experts.size());
      for (int t = 0; t < T; ++t) {
        const uint64_t tok = tokens_evaluated_ + static_cast<uint64_t>(t);
        std::copy_n(replay_->experts(tok, il), moe_k_, &routing_.experts[static_cast<size_t>(t) * moe_k_]);
        std::copy_n(replay_->weights(tok, il), moe_k_, &routing_.weights[static_cast<size_t>(t) * moe_k_]);
      }
      trim_stats_ += trim_routing(routing_, cfg_.trims, is_cached, routes_, &drops_);
    } else {
      trim_stats_ += route_layer(d.ffn.router, L.selection_bias, router_logits_.data(), T,
                                 static_cast<int>(hp_.n_expert), moe_k_, cfg_.trims, is_cached, routing_, routes_,
                                 &drops_);
    }
    // This layer's prefetch (if any) is consumed now; the next one is started
    // by after_submit, behind this layer's own reads.
    std::optional<PrefetchedExperts> mine = std::move(prefetch_);
    prefetch_.reset();
    ExpertSource src;
    src.store = store_.get();
    src.all_resident = cfg_.load_all;
    src.prefetched = mine ? &*mine : nullptr;
    // Prefetch may run at every micro-batch size, or (--prefetch=prefill) at
    // prompt micro-batches only, where a layer's long expert GEMM can hide
    // the next layer's union reads if they are slower than this layer's own.
    // Its price is memory: one more layer's predicted experts in flight
    // (moe::experts_in_flight_bytes; decode: about k experts; a long
    // prefill: up to the whole next layer).
    const int depth = prefetch_depth_for_batch(prefetch_setting_, moe_k_, T);
    if (depth > 0) src.after_submit = [this, il, T, depth] { start_prefetch(il, T, depth); };
    moe_ffn_.run(il, L.experts, xn_.data(), routes_, drops_, src, tmp_.data(), pool_);
    if (cfg_.route_trace) record_route(il, segs);
    if (batching_) count_batch_experts(il, segs);
    if (il < static_cast<int>(hp_.n_layer)) {
      if (usage_.empty()) usage_.assign(static_cast<size_t>(hp_.n_layer) * hp_.n_expert, 0);
      for (int t = 0; t < T; ++t)
        for (const moe::ExpertWeight& ew : routes_.row(t))
          ++usage_[static_cast<size_t>(il) * hp_.n_expert + static_cast<size_t>(ew.expert)];
    }
    if (L.shared) {
      // The shared expert reads the same normed input; added unweighted.
      shared_out_.resize(x_.size());
      dense_ffn(L.shexp, d.ffn.act, T, shared_out_.data());
      if (L.shexp_gate)  // scaled by sigmoid(ffn_gate_inp_shexp . x)
        for (int t = 0; t < T; ++t) {
          const float g = ops.dot(L.shexp_gate, &xn_[static_cast<size_t>(t) * n_embd], n_embd);
          ops.scale_mul(&shared_out_[static_cast<size_t>(t) * n_embd], 1.0f / (1.0f + std::exp(-g)), nullptr,
                        &shared_out_[static_cast<size_t>(t) * n_embd], n_embd);
        }
      for (size_t i = 0; i < x_.size(); ++i) tmp_[i] += shared_out_[i];
    }
  } else {
    dense_ffn(L.dense, d.ffn.act, T, tmp_.data());
  }
  for (size_t i = 0; i < x_.size(); ++i) x_[i] += tmp_[i];
}

}  // namespace sluice::model
