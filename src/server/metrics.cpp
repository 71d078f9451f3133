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
  add(o, "sluice_queue_depth", "gauge", "Requests waiting for the model.", static_cast<double>(m.queue_depth));
  add(o, "sluice_busy", "gauge", "1 while a generation runs.", m.busy ? 1.0 : 0.0);
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
