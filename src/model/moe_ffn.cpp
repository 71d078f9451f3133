#include "model/moe_ffn.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "util/error.h"

namespace sluice::model {

void MoeFfn::run(int layer, const ExpertTemplate& tmpl, const float* xn, int n_tokens, const Routing& routing,
                 moe::ExpertStore& store, float* out, ThreadPool& pool) {
  using Clock = std::chrono::steady_clock;
  const auto t_run = Clock::now();
  double io_s = 0;
  const int k = routing.k;
  const int64_t n_embd = tmpl.m.gate.n_in;
  const int64_t n_out = tmpl.m.down.n_out;

  // Activations converted once per token, as llama.cpp's mul_mat_id does.
  act_gate_.quantize(tmpl.m.gate.kern->vec_dot_type, xn, n_tokens, n_embd, n_embd, &pool);
  const bool same_act = tmpl.m.up.kern->vec_dot_type == tmpl.m.gate.kern->vec_dot_type;
  if (!same_act) act_up_.quantize(tmpl.m.up.kern->vec_dot_type, xn, n_tokens, n_embd, n_embd, &pool);
  const QuantizedRows& act_up = same_act ? act_gate_ : act_up_;

  // Distinct experts in ascending id order, with the (token, slot) pairs using each.
  std::vector<int> experts;
  for (int i = 0; i < n_tokens * k; ++i) experts.push_back(routing.experts[i]);
  std::sort(experts.begin(), experts.end());
  experts.erase(std::unique(experts.begin(), experts.end()), experts.end());
  std::vector<std::vector<int>> users(experts.size());  // flat (t * k + slot) indices
  for (int i = 0; i < n_tokens * k; ++i) {
    const auto it = std::lower_bound(experts.begin(), experts.end(), routing.experts[i]);
    users[it - experts.begin()].push_back(i);
  }

  slot_out_.resize(static_cast<size_t>(n_tokens) * k * n_out);
  const uint64_t read_before = store.stats().experts_read;
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
    const std::vector<int>& u = users[idx];
    rows_gate_.resize(u.size());
    rows_up_.resize(u.size());
    for (size_t i = 0; i < u.size(); ++i) {
      const int t = u[i] / k;
      rows_gate_[i] = act_gate_.row(t);
      rows_up_[i] = act_up.row(t);
    }
    expert_out_.resize(u.size() * n_out);
    swiglu_.run(m, rows_gate_, rows_up_, expert_out_.data(), n_out, pool);
    for (size_t i = 0; i < u.size(); ++i)
      std::memcpy(&slot_out_[static_cast<size_t>(u[i]) * n_out], &expert_out_[i * n_out], sizeof(float) * n_out);
    t_io = Clock::now();
  }
  // Every expert was taken, so every read of this batch has completed and
  // been counted. Clamp: a store counting reads differently must not wrap
  // the unsigned hit count (the telemetry tests check read against the store).
  // Routing trims (when they land) remove experts before the fetch: they add
  // to routed and dropped (and the per-trim counts and dropped_bytes).
  const uint64_t routed = experts.size();
  const uint64_t dropped = 0;
  const uint64_t read = std::min<uint64_t>(store.stats().experts_read - read_before, routed - dropped);
  counters_.routed += routed;
  counters_.dropped += dropped;
  counters_.read += read;
  counters_.hit += routed - dropped - read;

  // Weighted sum in slot order (fixed, independent of arrival order).
  for (int t = 0; t < n_tokens; ++t) {
    float* o = out + static_cast<int64_t>(t) * n_out;
    for (int s = 0; s < k; ++s) {
      const float w = routing.weight(t, s);
      const float* e = &slot_out_[(static_cast<size_t>(t) * k + s) * n_out];
      if (s == 0) {
        for (int64_t i = 0; i < n_out; ++i) o[i] = w * e[i];
      } else {
        for (int64_t i = 0; i < n_out; ++i) o[i] += w * e[i];
      }
    }
  }
  io_s_ += io_s;
  matmul_s_ += std::chrono::duration<double>(Clock::now() - t_run).count() - io_s;
}

}  // namespace sluice::model
