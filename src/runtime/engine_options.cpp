#include "runtime/engine_options.h"

#include <algorithm>
#include <charconv>
#include <thread>

#include <cstdio>
#include <functional>
#include <optional>

#include "gguf/gguf.h"
#include "model/thread_pool.h"
#include "moe/cache_budget.h"
#include "util/error.h"
#include "util/proc_memory.h"

namespace sluice::runtime {
namespace {

// /proc/meminfo text, with MemAvailable lowered to the cgroup's room when
// that is smaller (said through `say` when set): MemAvailable ignores cgroup
// limits, so --cache-mb auto and the KV bound take the smaller.
std::string available_meminfo(const std::function<void(const std::string&)>& say) {
  std::string text = read_proc_meminfo();
  const std::optional<uint64_t> room = process_cgroup_memory().room;
  const uint64_t available = meminfo_available_bytes(text);
  if (!room || *room >= available) return text;
  if (say)
    say("cache: cgroup memory limit leaves " + moe::format_mib(*room) + ", below MemAvailable " +
        moe::format_mib(available) + ": sizing from the cgroup");
  return "MemAvailable: " + std::to_string(*room / 1024) + " kB\n";
}

}  // namespace

int default_thread_count() {
  // hardware_concurrency() may return 0 when it cannot tell.
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int parse_prefetch(const std::string& value, const std::string& flag) {
  if (value == "off") return 0;
  if (value == "auto") return model::kPrefetchAuto;
  if (value == "prefill") return model::kPrefetchPrefill;
  constexpr int kMaxDepth = 1024;  // above any real top-k; capped at the top-k at load anyway
  int n = -1;
  const char* end = value.data() + value.size();
  const auto [p, ec] = std::from_chars(value.data(), end, n);
  if (value.empty() || ec != std::errc() || p != end || n < 0 || n > kMaxDepth)
    throw Error(flag + ": expected off, prefill, auto or a number of experts 0.." + std::to_string(kMaxDepth) + " (got '" +
                value + "')");
  return n;
}

model::ModelConfig EngineOptions::to_model_config() const {
  if (model_path.empty()) throw Error("-m: no model file given");
  model::ThreadPool::check_thread_count(threads);
  if (io_threads < 1) throw Error("--io-threads: must be >= 1 (got " + std::to_string(io_threads) + ")");
  if (n_ctx < 0) throw Error("-c: context size must be >= 0 (got " + std::to_string(n_ctx) + ")");
  if (ubatch < 1) throw Error("--ubatch: must be >= 1 (got " + std::to_string(ubatch) + ")");
  model::ModelConfig c;
  c.ubatch = ubatch;
  c.trims = trims;
  if (resolve_trims) {
    resolve_trims(c.trims);
  } else {
    moe::validate_trim_config(c.trims);
  }
  c.dense_mode = moe::parse_dense_mode(dense_weights);
  c.resident_layout = model::parse_resident_layout(resident_layout);
  c.odirect = !no_odirect;
  c.io_threads = io_threads;
  c.io_engine = io::parse_io_engine(io_engine, "--io-engine");
  if (io_depth < 1 || io_depth > 4096)
    throw Error("--io-depth: must be in [1, 4096] (got " + std::to_string(io_depth) + ")");
  c.io_depth = io_depth;
  c.load_all = load_all;
  c.threads = threads;
  c.kv_type = model::parse_kv_type(kv_type);
  c.n_ctx = n_ctx;
  c.prefetch = parse_prefetch(prefetch);

  const moe::CacheMbSetting cache = moe::parse_cache_mb(cache_mb);
  if (cache_floor_mb < 0)
    throw Error("--cache-floor-mb: must be >= 0 (got " + std::to_string(cache_floor_mb) + ")");
  if (cache_ceil_mb < 0) throw Error("--cache-ceil-mb: must be >= 0 (got " + std::to_string(cache_ceil_mb) + ")");
  if (!cache.automatic && (cache_floor_mb > 0 || cache_ceil_mb > 0))
    throw Error(std::string(cache_floor_mb > 0 ? "--cache-floor-mb" : "--cache-ceil-mb") +
                ": only applies to --cache-mb auto (got --cache-mb " + cache_mb + ")");
  if (cache_ceil_mb > 0 && cache_floor_mb > cache_ceil_mb)
    throw Error("--cache-floor-mb " + std::to_string(cache_floor_mb) + " is above --cache-ceil-mb " +
                std::to_string(cache_ceil_mb));
  constexpr int64_t kMaxMib = int64_t{1} << 40;  // keeps MiB -> bytes from overflowing
  if (cache_floor_mb > kMaxMib || cache_ceil_mb > kMaxMib || cache.mib > static_cast<uint64_t>(kMaxMib))
    throw Error("--cache-mb: sizes above 2^40 MiB are not meaningful");
  c.cache_auto = cache.automatic;
  c.cache_bytes = cache.mib * moe::kMiB;
  c.cache_floor_bytes = static_cast<uint64_t>(cache_floor_mb) * moe::kMiB;
  c.cache_ceil_bytes = static_cast<uint64_t>(cache_ceil_mb) * moe::kMiB;
  c.log = log ? log : [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  const std::string meminfo = available_meminfo(cache.automatic ? c.log : nullptr);
  if (cache.automatic) c.cache_meminfo = meminfo;
  c.memory_bytes = meminfo_available_bytes(meminfo);  // bounds the KV cache (-c)
  if (!route_trace.empty()) {
    io::OutputOptions out{.flag = "--route-trace", .inputs = gguf::model_file_paths(model_path), .overwrite = true};
    out.inputs.insert(out.inputs.end(), extra_inputs.begin(), extra_inputs.end());
    c.route_trace = std::make_shared<moe::RouteTraceWriter>(route_trace, std::move(out));
  }
  if (!route_replay.empty()) {
    try {
      c.route_replay = std::make_shared<const moe::RouteTrace>(moe::read_route_trace(route_replay));
    } catch (const Error& e) {
      throw Error(std::string("--route-replay: ") + e.what());
    }
  }
  return c;
}

}  // namespace sluice::runtime
