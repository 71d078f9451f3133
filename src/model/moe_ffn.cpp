#include "model/moe_ffn.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "util/error.h"

namespace sluice::model {

void MoeFfn::run(int layer, const ExpertTemplate& tmpl, const float* xn, const moe::RoutingTable& routing,
                 const RouteDrops& drops, moe::ExpertStore& store, float* out, ThreadPool& pool) {
  using Clock = std::chrono::steady_clock;
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

  // Distinct experts in ascending id order, each with its uses in (position, slot) order.
  const std::vector<moe::DistinctExpert> distinct = moe::expert_union(routing);
  std::vector<int> experts(distinct.size());
  for (size_t i = 0; i < distinct.size(); ++i) experts[i] = distinct[i].expert;

  slot_out_.resize(row_start_[n_tokens] * static_cast<size_t>(n_out));
  const uint64_t read_before = store.stats().experts_read;
  if (!experts.empty()) {
    auto t_io = Clock::now();
    moe::ExpertStore::Batch batch = store.fetch(layer, experts);
    for (;;) {
      const int idx = batch.next_ready();
      io_s += std::chrono::duration<double>(Clock::now() - t_io).count();
      if (idx < 0) break;
      const moe::ExpertView view = batch.view(idx);
      FfnMatrices m = tmpl.m;
      m.gate.data = static_cast<const uint8_t*>(view.gate);
      m.up.data = static_cast<const uint8_t*>(view.up);
      m.down.data = static_cast<const uint8_t*>(view.down);
      if (!m.gate.data || !m.up.data || !m.down.data)
        throw Error("expert store returned no data for layer " + std::to_string(layer) + " expert " +
                    std::to_string(experts[idx]));
      const std::vector<moe::ExpertUse>& u = distinct[idx].uses;
      rows_gate_.resize(u.size());
      rows_up_.resize(u.size());
      for (size_t i = 0; i < u.size(); ++i) {
        rows_gate_[i] = act_gate_.row(u[i].position);
        rows_up_[i] = act_up.row(u[i].position);
      }
      expert_out_.resize(u.size() * n_out);
      swiglu_.run(m, rows_gate_, rows_up_, expert_out_.data(), n_out, pool);
      for (size_t i = 0; i < u.size(); ++i) {
        const size_t entry = row_start_[u[i].position] + static_cast<size_t>(u[i].slot);
        std::memcpy(&slot_out_[entry * n_out], &expert_out_[i * n_out], sizeof(float) * n_out);
      }
      t_io = Clock::now();
    }
  }
  // Every expert was taken, so every read of this batch has completed and
  // been counted. Clamp: a store counting reads differently must not wrap
  // the unsigned hit count (the telemetry tests check read against the store).
  const uint64_t dropped = drops.total();
  const uint64_t fetched = experts.size();
  const uint64_t read = std::min<uint64_t>(store.stats().experts_read - read_before, fetched);
  counters_.routed += fetched + dropped;
  counters_.dropped += dropped;
  counters_.dropped_top_p += drops.top_p;
  counters_.dropped_budget += drops.budget;
  counters_.dropped_cold += drops.cold;
  for (int32_t e : drops.experts)  // I/O saved: only what would have been read
    if (!store.is_cached(layer, e)) counters_.dropped_bytes += store.expert_bytes(layer);
  counters_.read += read;
  counters_.hit += fetched - read;

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
        const float w = row[s].weight;
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
  matmul_s_ += std::chrono::duration<double>(Clock::now() - t_run).count() - io_s;
}

}  // namespace sluice::model
