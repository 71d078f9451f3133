#include "server/metrics.h"

#include <cstdio>

namespace sluice::server {
namespace {

void add(std::string& out, const char* name, const char* type, const char* help, double v) {
  char num[64];
  std::snprintf(num, sizeof num, "%.17g", v);
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + num + "\n";
}

}  // namespace

std::string prometheus_text(const EngineMetrics& m) {
  const telemetry::RunSummary& s = m.run;
  std::string o;
  add(o, "sluice_requests_total", "counter", "Generation requests run (finished, cancelled or failed).",
      static_cast<double>(m.requests));
  add(o, "sluice_requests_failed_total", "counter", "Generation requests ended by an engine error.",
      static_cast<double>(m.requests_failed));
  add(o, "sluice_requests_cancelled_total", "counter", "Generation requests stopped because the client went away.",
      static_cast<double>(m.requests_cancelled));
  add(o, "sluice_prompt_tokens_total", "counter", "Prompt tokens of all requests.", static_cast<double>(m.prompt_tokens));
  add(o, "sluice_prompt_tokens_cached_total", "counter", "Prompt tokens whose KV rows were reused from the previous request.",
      static_cast<double>(m.cached_prompt_tokens));
  add(o, "sluice_tokens_generated_total", "counter", "Tokens sampled.", static_cast<double>(m.completion_tokens));
  add(o, "sluice_queue_depth", "gauge", "Requests waiting for a slot.", static_cast<double>(m.queue_depth));
  add(o, "sluice_queue_limit", "gauge", "Requests that may wait beyond the slots (--max-queue); more get 429.",
      static_cast<double>(m.max_queue));
  add(o, "sluice_requests_rejected_total", "counter", "Requests answered 429 because the queue was full.",
      static_cast<double>(m.requests_rejected));
  add(o, "sluice_busy", "gauge", "1 while a generation runs.", m.busy ? 1.0 : 0.0);
  add(o, "sluice_slots", "gauge", "Sequence slots (--parallel).", m.slots);
  add(o, "sluice_slots_busy", "gauge", "Slots running a request now.", m.slots_busy);
  add(o, "sluice_slots_free", "gauge", "Slots free now.", m.slots - m.slots_busy);
  add(o, "sluice_slot_state_bytes", "gauge",
      "Slots' model state allocated now (KV rows, recurrent state): running requests and idle slots kept for "
      "prefix reuse.",
      static_cast<double>(m.state_bytes));
  add(o, "sluice_slot_state_busy_bytes", "gauge", "Of sluice_slot_state_bytes, the slots running a request.",
      static_cast<double>(m.state_busy_bytes));
  add(o, "sluice_slot_state_budget_bytes", "gauge",
      "What the slots' states may hold at once (--state-mb; --cache-mb auto leaves it free).",
      static_cast<double>(m.state_budget));
  add(o, "sluice_requests_rejected_memory_total", "counter",
      "Requests answered 503 because no memory for a slot's state could be had (--state-mb).",
      static_cast<double>(m.requests_rejected_memory));
  add(o, "sluice_prompt_tokens_recomputed_total", "counter",
      "Reused prefix tokens evaluated again (a recurrent slot's checkpoint lay before the shared prefix's end).",
      static_cast<double>(m.recomputed_tokens));
  const model::BatchCounters& b = m.batch;
  add(o, "sluice_batch_steps_total", "counter", "Batched forward passes (steps).", static_cast<double>(b.steps));
  add(o, "sluice_batch_sequences_total", "counter", "Sequences over all steps (sum of batch sizes).",
      static_cast<double>(b.sequences));
  add(o, "sluice_batch_rows_total", "counter", "Rows (positions) over all steps.", static_cast<double>(b.rows));
  add(o, "sluice_batch_size_last", "gauge", "Sequences in the last step.", b.last_sequences);
  add(o, "sluice_batch_rows_last", "gauge", "Rows in the last step.", b.last_rows);
  add(o, "sluice_batch_experts_union_total", "counter",
      "Distinct experts the steps' MoE layers needed: each read (or served from cache) once for the whole batch.",
      static_cast<double>(b.union_experts));
  add(o, "sluice_batch_experts_per_sequence_total", "counter",
      "Sum over each step's sequences of the distinct experts each needed alone.",
      static_cast<double>(b.sequence_experts));
  add(o, "sluice_batch_experts_union_last", "gauge", "Distinct experts of the last step (all MoE layers).",
      static_cast<double>(b.last_union_experts));
  add(o, "sluice_batch_experts_per_sequence_last", "gauge", "Per-sequence expert demands of the last step, summed.",
      static_cast<double>(b.last_sequence_experts));
  add(o, "sluice_batch_expert_bytes_union_total", "counter",
      "Expert bytes of the steps' distinct experts (gate+up+down): what the steps read with no cache, "
      "the union model's prediction of sluice_expert_bytes_read_total.",
      static_cast<double>(b.union_bytes));
  add(o, "sluice_batch_expert_bytes_saved_total", "counter",
      "Expert bytes the union spared: per-sequence demand bytes minus union bytes.",
      static_cast<double>(b.sequence_bytes - b.union_bytes));
  add(o, "sluice_prefill_tokens_total", "counter", "Tokens evaluated in prefill batches.", s.prefill_tokens);
  add(o, "sluice_decode_tokens_total", "counter", "Tokens evaluated one at a time.", s.decode_tokens);
  add(o, "sluice_prefill_tokens_per_second", "gauge", "Prefill throughput over all requests.", s.prefill_tps());
  add(o, "sluice_decode_tokens_per_second", "gauge", "Decode throughput over all requests.", s.decode_tps());
  add(o, "sluice_decode_mib_read_per_token", "gauge", "Expert MiB read from disk per decoded token.",
      s.decode_mib_per_tok());
  add(o, "sluice_expert_cache_hit_percent", "gauge", "Expert cache hits / (hits + reads), percent.", s.cache_hit_pct());
  add(o, "sluice_expert_bytes_read_total", "counter", "Expert bytes read from disk.", static_cast<double>(s.bytes_read));
  add(o, "sluice_majflt_per_token", "gauge", "Major page faults per evaluated token.", s.majflt_per_tok());
  add(o, "sluice_ttft_seconds", "gauge", "Latency to the first token of the server's first request.", s.ttft_ms / 1e3);
  add(o, "sluice_peak_rss_mib", "gauge", "Peak resident set size, MiB.", s.peak_rss_mib);
  add(o, "sluice_dense_resident_fraction", "gauge", "Fraction of dense weights resident in memory.",
      s.dense_resident_frac);
  return o;
}

}  // namespace sluice::server
