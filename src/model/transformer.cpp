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

Transformer::Transformer(std::shared_ptr<const gguf::GgufModel> gguf, const ModelConfig& cfg, ArchDesc desc)
    : gguf_(std::move(gguf)),
      cfg_(cfg),
      desc_(std::move(desc)),
      hp_(desc_.hp),
      pool_(cfg.threads),
      rope_(desc_.hp.rope) {
  check_config();
  const int n_ctx = resolve_context(cfg.n_ctx, hp_.n_ctx_train);
  const StatePlan plan = plan_state(n_ctx);
  const std::vector<LayerStateSpec>& specs = plan.specs;

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
  const auto not_loaded = [&](const gguf::TensorInfo& t) {
    return gguf::is_expert_weight(t) ||
           (desc_.ignores(t.name) && !(mtp_layer_ >= 0 && t.name.rfind(head_prefix, 0) == 0));
  };
  uint64_t dense_bytes = 0;
  for (const gguf::TensorInfo& t : gguf_->tensors())
    if (!not_loaded(t)) dense_bytes += t.bytes;
  check_resident_fits(dense_bytes, plan.bytes.total());
  dense_ = std::make_unique<moe::DenseWeights>(*gguf_, dc, not_loaded);
  bind_weights(experts);
  try {
    const bool now = !cfg.lazy_slots;  // lazy: slot_allocate() gives a slot its memory
    state_ = std::make_unique<ModelState>(specs, cfg.kv_type, n_ctx, ModelState::kDefaultMaxCheckpoints, now);
    for (int i = 1; i < cfg.n_slots; ++i)
      extra_slots_.push_back(
          std::make_unique<ModelState>(specs, cfg.kv_type, n_ctx, ModelState::kDefaultMaxCheckpoints, now));
    slot_state_budget_ = plan.slot_budget;
    if (mtp_layer_ >= 0)
      mtp_.state = std::make_unique<ModelState>(std::vector<LayerStateSpec>{plan.nextn}, cfg.kv_type, n_ctx);
  } catch (const std::bad_alloc&) {
    throw Error("-c " + std::to_string(n_ctx) + ": could not allocate the model state (" +
                moe::format_mib(plan.bytes.total()) + "); lower -c");
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
    sc.cache_bytes = resolve_cache_bytes(cfg, shapes, dense_->bytes(), plan.bytes.total(),
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
  if (mtp_.state) {
    b.kv += mtp_.state->bytes().kv;
    b.recurrent += mtp_.state->bytes().recurrent;
    b.indexer += mtp_.state->bytes().indexer;
  }
  return b;
}

void Transformer::check_eval(std::span<const int32_t> tokens, int pos0, const ModelState& st, const char* what) const {
  const int T = static_cast<int>(tokens.size());
  if (pos0 != st.n_past())
    throw Error(std::string(what) + " at position " + std::to_string(pos0) + " but the " +
                (&st == mtp_.state.get() ? "NextN head's state" : "model state") + " holds " +
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
      float* hidden = hidden_out ? hidden_out + static_cast<int64_t>(c0) * mtp_hidden_width() : nullptr;
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
  x_.resize(static_cast<size_t>(T) * x_width());
  row_tokens_.resize(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) embed_row(tokens[t], t);
  state_->begin_append(T);
  const RowSegment seg{0, T, pos0, state_.get()};
  run_trunk(T, {&seg, 1});
  state_->commit_append();

  const int n_out = T - first_row;
  if (hidden_out && hp_.dsv4.hc_count > 0) {
    // deepseek4's NextN head reads the last streams themselves, before the head mixes them.
    std::copy(x_.begin(), x_.begin() + static_cast<std::ptrdiff_t>(T * x_width()), hidden_out);
    if (n_out > 0) {
      final_norm_rows(&x_[static_cast<size_t>(first_row * x_width())], n_out, xn_.data());
      matmul_f32(output_, xn_.data(), n_out, logits_out, pool_, act_);
    }
  } else if (hidden_out) {
    // Every row's state after output_norm (rows are independent: the logits'
    // rows are the same values either way).
    final_norm_rows(x_.data(), T, hidden_out);
    if (n_out > 0) matmul_f32(output_, hidden_out + static_cast<int64_t>(first_row) * n_embd, n_out, logits_out, pool_, act_);
  } else if (n_out > 0) {
    final_norm_rows(&x_[static_cast<size_t>(first_row * x_width())], n_out, xn_.data());
    matmul_f32(output_, xn_.data(), n_out, logits_out, pool_, act_);
  }
  if (n_out > 0) softcap_logits(logits_out, n_out);
  tokens_evaluated_ += static_cast<uint64_t>(T);
}

void Transformer::router_logits(const Layer& L, const float* xn, int T, std::vector<float>& logits) {
  const int64_t n_expert = hp_.n_expert;
  logits.resize(static_cast<size_t>(T) * n_expert);
  matmul_f32(L.router, xn, T, logits.data(), pool_, act_);
  if (L.router_bias)
    for (int t = 0; t < T; ++t) kernels::ops().add(&logits[static_cast<size_t>(t) * n_expert], L.router_bias, n_expert);
}

void Transformer::dense_ffn(const FfnMatrices& m, Activation act, int T, float* out, float clamp) {
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
  swiglu_.run(m, act, FfnBiases{}, rows_gate, rows_up, out, n_embd, pool_, clamp);
}

void Transformer::forward_layer(int il, int T, std::span<const RowSegment> segs, int st_layer) {
  const Layer& L = layers_[il];
  const LayerDesc& d = *L.desc;
  if (d.block == BlockKind::Gemma4) return forward_gemma4_layer(il, T, segs, st_layer);
  if (d.block == BlockKind::Dsv4) return forward_dsv4_layer(il, T, segs, st_layer);
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
    } else if (d.attn.kind == AttentionKind::DeltaNet || d.attn.kind == AttentionKind::Kda) {
      RecurrentState& rs = st.recurrent(st_layer);
      std::vector<float*> row_dst;  // MTP verification: the rows ModelState checkpoints
      for (float* p = st.row_capture(st_layer, 0); p; p = st.row_capture(st_layer, static_cast<int>(row_dst.size())))
        row_dst.push_back(p);
      DeltaNetStateView view{rs.conv(), rs.matrices(), row_dst.data(), static_cast<int>(row_dst.size())};
      if (d.attn.kind == AttentionKind::Kda) {
        kda_.run(L.kda, hp_, xn, sg.n, view, out, pool_, act_);
      } else {
        deltanet_.run(L.dn, hp_, xn, sg.n, view, out, pool_, act_);
      }
    } else if (d.attn.kind == AttentionKind::ShortConv) {
      short_conv_.run(L.sc, hp_, xn, sg.n, st.recurrent(st_layer).conv(), out, pool_, act_);
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
    routed_experts(il, T, segs, L.selection_bias);
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

// Routes layer il's T rows (router_logits_ already filled; a replayed trace
// decides instead where one is given), then runs the routed experts on xn_
// into tmp_, and records the route, the batch's distinct experts and usage.
// Shared by every block kind with routed experts.
void Transformer::routed_experts(int il, int T, std::span<const RowSegment> segs, const float* selection_bias) {
  const Layer& L = layers_[il];
  const LayerDesc& d = *L.desc;
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
  } else if (d.ffn.router.kind == RouterKind::HashSqrtSoftplus) {
    route_dsv4_hash(il, T);
    trim_stats_ += trim_routing(routing_, cfg_.trims, is_cached, routes_, &drops_);
  } else {
    trim_stats_ += route_layer(d.ffn.router, selection_bias, router_logits_.data(), T,
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
}

}  // namespace sluice::model
