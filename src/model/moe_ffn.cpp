#include "model/moe_ffn.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "model/packed_layout.h"
#include "util/clock.h"
#include "util/error.h"

namespace sluice::model {
namespace {

using Clock = std::chrono::steady_clock;

// One batch this run reads experts from, and which distinct expert each of its
// entries is (-1: not needed by this run, i.e. a mispredicted prefetch).
struct Feed {
  moe::ExpertStore::Batch* batch = nullptr;
  std::vector<int> to_distinct;
  size_t wanted = 0;  // entries with to_distinct >= 0
};

// Fetches `ids` (distinct experts indices of this run) as a new batch; returns
// it with its cache hit flags (empty ids: no batch).
std::optional<moe::ExpertStore::Batch> fetch_some(moe::ExpertStore& store, int layer,
                                                   const std::vector<moe::DistinctExpert>& distinct,
                                                   const std::vector<size_t>& ids, std::vector<uint8_t>& hit) {
  hit.clear();
  if (ids.empty()) return std::nullopt;
  std::vector<int> experts(ids.size());
  std::vector<uint8_t> pack(ids.size());
  for (size_t j = 0; j < ids.size(); ++j) {
    experts[j] = distinct[ids[j]].expert;
    pack[j] = distinct[ids[j]].uses.size() >= kMinUsesToPackStreamed;
  }
  moe::FetchOptions opt;
  opt.transform_streamed = pack;
  moe::ExpertStore::Batch b = store.fetch(layer, experts, opt);
  // fetch() recorded what it asked for and its hits; this thread is the only
  // one fetching, so the record is this batch's.
  hit = store.last_fetch(layer).hit;
  hit.resize(ids.size(), 0);
  return b;
}

}  // namespace

void MoeFfn::compute_expert(size_t i, const moe::ExpertView& view, int layer, const ExpertTemplate& tmpl,
                            const QuantizedRows& act_up, int64_t n_out, ThreadPool& pool) {
  // The view says whether the store re-laid these bytes (cached and
  // --load-all experts, and streamed ones this batch asked for).
  FfnMatrices m;
  m.gate = expert_matrix(tmpl.m.gate, view.gate, view.packed);
  m.up = expert_matrix(tmpl.m.up, view.up, view.packed);
  m.down = expert_matrix(tmpl.m.down, view.down, view.packed);
  if (!m.gate.data || !m.up.data || !m.down.data)
    throw Error("expert store returned no data for layer " + std::to_string(layer) + " expert " +
                std::to_string(distinct_[i].expert));
  const std::vector<moe::ExpertUse>& u = distinct_[i].uses;
  rows_gate_.resize(u.size());
  rows_up_.resize(u.size());
  for (size_t j = 0; j < u.size(); ++j) {
    rows_gate_[j] = act_gate_.row(u[j].position);
    rows_up_[j] = act_up.row(u[j].position);
  }
  expert_out_.resize(u.size() * n_out);
  const size_t e = static_cast<size_t>(distinct_[i].expert);
  FfnBiases bias;
  if (tmpl.gate_bias) bias.gate = tmpl.gate_bias + e * static_cast<size_t>(m.gate.n_out);
  if (tmpl.up_bias) bias.up = tmpl.up_bias + e * static_cast<size_t>(m.up.n_out);
  if (tmpl.down_bias) bias.down = tmpl.down_bias + e * static_cast<size_t>(n_out);
  swiglu_.run(m, tmpl.act, bias, rows_gate_, rows_up_, expert_out_.data(), n_out, pool, tmpl.clamp);
  for (size_t j = 0; j < u.size(); ++j) {
    const size_t entry = row_start_[u[j].position] + static_cast<size_t>(u[j].slot);
    std::memcpy(&slot_out_[entry * n_out], &expert_out_[j * n_out], sizeof(float) * n_out);
  }
}

void MoeFfn::run(int layer, const ExpertTemplate& tmpl, const float* xn, const moe::RoutingTable& routing,
                 const RouteDrops& drops, const ExpertSource& src, float* out, ThreadPool& pool) {
  if (!src.store) throw Error("moe ffn: layer " + std::to_string(layer) + " has no expert store");
  moe::ExpertStore& store = *src.store;
  const auto t_run = Clock::now();
  double io_s = 0;
  const int n_tokens = routing.n_positions();
  const int64_t n_embd = tmpl.m.gate.n_in;
  const int64_t n_out = tmpl.m.down.n_out;

  // Activations converted once per layer batch, shared by every expert.
  act_gate_.quantize(tmpl.m.gate.kern->vec_dot_type, xn, n_tokens, n_embd, n_embd, &pool);
  const bool same_act = tmpl.m.up.kern->vec_dot_type == tmpl.m.gate.kern->vec_dot_type;
  if (!same_act) act_up_.quantize(tmpl.m.up.kern->vec_dot_type, xn, n_tokens, n_embd, n_embd, &pool);
  const QuantizedRows& act_up = same_act ? act_gate_ : act_up_;

  // Each (position, slot) entry gets its own output row; rows vary in length.
  row_start_.resize(static_cast<size_t>(n_tokens) + 1);
  row_start_[0] = 0;
  for (int t = 0; t < n_tokens; ++t) row_start_[t + 1] = row_start_[t] + routing.row(t).size();
  slot_out_.resize(row_start_[n_tokens] * static_cast<size_t>(n_out));

  // Distinct experts in ascending id order, each with its uses in (position, slot) order.
  distinct_ = moe::expert_union(routing);
  const size_t n_distinct = distinct_.size();
  std::vector<uint8_t> hit(n_distinct, 0);   // served by the cache (or load_all) without a read
  std::vector<uint8_t> done(n_distinct, 0);  // computed

  // Which of them the prefetch holds; the others are this layer's own fetch.
  PrefetchedExperts* pf = src.prefetched && src.prefetched->layer == layer ? src.prefetched : nullptr;
  Feed pf_feed;
  std::vector<size_t> own;
  if (pf) {
    pf_feed.batch = &pf->batch;
    pf_feed.to_distinct.assign(pf->experts.size(), -1);
  }
  for (size_t i = 0; i < n_distinct; ++i) {
    if (pf) {
      const auto it = std::find(pf->experts.begin(), pf->experts.end(), distinct_[i].expert);
      if (it != pf->experts.end()) {
        const size_t j = static_cast<size_t>(it - pf->experts.begin());
        pf_feed.to_distinct[j] = static_cast<int>(i);
        ++pf_feed.wanted;
        hit[i] = j < pf->hit.size() && pf->hit[j];
        continue;
      }
    }
    own.push_back(i);
  }

  // Consumes `f` until every wanted entry is computed; returns false (and
  // leaves the rest undone) when one of its reads failed.
  auto consume = [&](Feed& f, bool tolerate_errors) {
    size_t got = 0;
    auto t_io = Clock::now();
    try {
      while (got < f.wanted) {
        const int idx = f.batch->next_ready();
        io_s += seconds_since(t_io);
        if (idx < 0) break;
        const int i = f.to_distinct[static_cast<size_t>(idx)];
        if (i >= 0) {
          f.batch->use(idx);  // a prefetched expert turns into a demand access here
          compute_expert(static_cast<size_t>(i), f.batch->view(idx), layer, tmpl, act_up, n_out, pool);
          done[static_cast<size_t>(i)] = 1;
          ++got;
        }
        t_io = Clock::now();
      }
    } catch (const Error&) {
      io_s += seconds_since(t_io);
      if (!tolerate_errors) throw;
      return false;
    }
    return true;
  };

  // The prediction's reads not started yet: the needed ones now go before
  // this layer's own, the wrong ones are dropped.
  if (pf) {
    std::vector<uint8_t> needed(pf->experts.size());
    for (size_t j = 0; j < needed.size(); ++j) needed[j] = pf_feed.to_distinct[j] >= 0;
    pf->batch.settle(needed);
  }
  // This layer's own reads first, then the next layer's prefetch behind them.
  auto t_io = Clock::now();
  std::vector<uint8_t> own_hit;
  std::optional<moe::ExpertStore::Batch> own_batch = fetch_some(store, layer, distinct_, own, own_hit);
  io_s += seconds_since(t_io);
  if (src.after_submit) src.after_submit();

  // The prefetch's reads were queued earlier, so they are consumed first.
  std::vector<size_t> retry;
  if (pf && pf_feed.wanted > 0 && !consume(pf_feed, true)) {
    // A prefetch read failed: read the needed experts it did not deliver again
    // (a persistent fault then fails as it would have without prefetch).
    for (size_t j = 0; j < pf_feed.to_distinct.size(); ++j) {
      const int i = pf_feed.to_distinct[j];
      if (i >= 0 && !done[static_cast<size_t>(i)]) retry.push_back(static_cast<size_t>(i));
    }
  }
  if (own_batch) {
    Feed f;
    f.batch = &*own_batch;
    f.to_distinct.assign(own.begin(), own.end());
    f.wanted = own.size();
    consume(f, false);
    for (size_t j = 0; j < own.size(); ++j) hit[own[j]] = own_hit[j];
  }
  if (!retry.empty()) {
    t_io = Clock::now();
    std::vector<uint8_t> retry_hit;
    std::optional<moe::ExpertStore::Batch> rb = fetch_some(store, layer, distinct_, retry, retry_hit);
    io_s += seconds_since(t_io);
    Feed f;
    f.batch = &*rb;
    f.to_distinct.assign(retry.begin(), retry.end());
    f.wanted = retry.size();
    consume(f, false);
    for (size_t j = 0; j < retry.size(); ++j) hit[retry[j]] = retry_hit[j];
  }

  // Every expert was computed, so every read that served one completed.
  served_.experts.resize(n_distinct);
  served_.hit = hit;
  uint64_t n_hit = 0;
  for (size_t i = 0; i < n_distinct; ++i) {
    served_.experts[i] = distinct_[i].expert;
    n_hit += (hit[i] || src.all_resident) ? 1 : 0;
  }
  const uint64_t dropped = drops.total();
  counters_.routed += n_distinct + dropped;
  counters_.dropped += dropped;
  counters_.dropped_top_p += drops.top_p;
  counters_.dropped_budget += drops.budget;
  counters_.dropped_cold += drops.cold;
  for (int32_t e : drops.experts)  // I/O saved: only what would have been read
    if (!store.is_cached(layer, e)) counters_.dropped_bytes += store.expert_bytes(layer);
  counters_.hit += n_hit;
  counters_.read += n_distinct - n_hit;
  if (pf) {
    const uint64_t used = pf_feed.wanted - retry.size();
    prefetch_.layers += 1;
    prefetch_.experts += pf->experts.size();
    prefetch_.used += used;
    prefetch_.wasted += pf->experts.size() - used;
    prefetch_.needed += n_distinct;
    prefetch_.failed += retry.size();
    for (size_t j = 0; j < pf->experts.size(); ++j) {
      const int i = pf_feed.to_distinct[j];
      const bool used_j = i >= 0 && std::find(retry.begin(), retry.end(), static_cast<size_t>(i)) == retry.end();
      const bool hit_j = j < pf->hit.size() && pf->hit[j];
      if (!used_j && !hit_j && !src.all_resident) prefetch_.wasted_bytes += store.expert_bytes(layer);
      if (used_j && !hit_j && !src.all_resident) prefetch_.read_ahead += 1;
    }
  }

  // Weighted sum in slot order (fixed, independent of arrival order). Positions
  // are independent, so splitting them over threads changes no value.
  auto combine = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = out + t * n_out;
      const auto row = routing.row(static_cast<int>(t));
      if (row.empty()) {
        std::fill(o, o + n_out, 0.0f);
        continue;
      }
      for (size_t s = 0; s < row.size(); ++s) {
        float w = row[s].weight * tmpl.weights_scale;
        if (tmpl.expert_scale) w *= tmpl.expert_scale[row[s].expert];
        const float* e = &slot_out_[(row_start_[t] + s) * n_out];
        if (s == 0) {
          for (int64_t i = 0; i < n_out; ++i) o[i] = w * e[i];
        } else {
          for (int64_t i = 0; i < n_out; ++i) o[i] += w * e[i];
        }
      }
    }
  };
  if (pool.size() > 1 && n_tokens > 1 && static_cast<int64_t>(row_start_[n_tokens]) * n_out >= 64 * 1024) {
    pool.parallel_for(n_tokens, combine);  // else cheaper than a pool round trip
  } else {
    combine(0, n_tokens);
  }
  io_s_ += io_s;
  matmul_s_ += seconds_since(t_run) - io_s;
}

}  // namespace sluice::model
