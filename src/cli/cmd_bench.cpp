// `sluice bench`: benchmarks. Three modes share the subcommand:
//   --io [FILE]   the storage device's random-read ceiling (bench/io_bench),
//   --mem         the memory read bandwidth (bench/mem_bench), with -m MODEL
//                 also that model's in-RAM decode roofline,
//   -m MODEL      the model benchmark, llama-bench style (bench/model_bench).
// This file only parses flags into typed configs and prints results; the
// measurements live in src/runtime.
//
// -m/--model is one option for both modes: with --io it names the model whose
// expert-slice sizes become the default --sizes (and whose file becomes the
// default FILE); without --io it selects the model benchmark.
#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/model_ref.h"
#include "cli/stdout_output.h"
#include "gguf/gguf.h"
#include "bench/io_bench.h"
#include "bench/mem_bench.h"
#include "bench/model_bench.h"
#include "io/uring_queue.h"
#include "util/error.h"
#include "tools/model_info.h"
#include "util/machine_conditions.h"

namespace sluice::cli {
namespace {

struct BenchOptions {
  // shared
  std::string model_path;  // -m/--model
  std::string output = "md";
  // --io mode
  bool io = false;           // --io given (with or without FILE)
  std::string io_path;       // FILE after --io ("" = take it from --model)
  std::string sizes;         // "" = default (model slice sizes + 4K + 1M, or 4K..4M)
  std::string lanes = "1,2,4,8,16";
  double seconds = 2.0;
  std::string max_bytes;     // "" = no budget
  bool direct_only = false, buffered_only = false, both = false;
  uint64_t seed = 1;
  bool no_fadv_random = false;
  // model mode (-m without --io); the lists are comma separated
  int n_prompt = 512;
  int n_gen = 128;
  int reps = 3;
  std::string threads = "1";
  std::string io_threads = "4";
  std::string dense_weights = "anon";
  std::string resident_layout = "packed";
  std::string moe_top_k;          // "" = the model's own k
  std::string prefetch = "off";   // off,prefill,auto,N
  std::string expert_budget;      // "" = off
  std::string mtp;                // "" = off
  std::string cache_mb = "off";
  bool no_odirect = false;
  bool load_all = false;
  bool cold = false;
  bool conditions = false;  // --conditions: print the machine conditions line and exit
  std::string kv_type = "f16";
  std::string route_replay;  // --route-replay TRACE
  std::string save_usage;    // --save-usage FILE
  std::string io_engine = "pread";  // --io-engine
  std::string io_depth;             // --io-depth: -m one value; --io a list (uring points)
  std::string io_ceiling;  // --io-ceiling FILE.json
  bool measure_ceiling = false;
  // --mem mode
  bool mem = false;
  std::string mem_size;  // "" = 1 GiB, or a quarter of MemAvailable where that is less
  bool threads_given = false, reps_given = false;
};

// Default sizes without a model: from a single page to a large sequential-ish chunk.
constexpr const char* kDefaultSizes = "4K,64K,1M,4M";

bench::IoBenchConfig io_config_from(const BenchOptions& o) {
  bench::IoBenchConfig cfg;
  cfg.path = o.io_path;
  if (!o.sizes.empty()) cfg.sizes = bench::parse_size_list(o.sizes, "--sizes");
  if (!o.model_path.empty()) {
    const gguf::GgufModel model = gguf::GgufModel::open(o.model_path);
    if (cfg.path.empty()) cfg.path = model.paths().front();
    if (cfg.sizes.empty()) {
      cfg.sizes = bench::expert_slice_sizes(model);
      if (cfg.sizes.empty()) {
        fail(o.model_path, "has no expert tensors (*_exps), so it gives no slice sizes; pass --sizes");
      }
      for (uint64_t extra : {uint64_t{4096}, uint64_t{1} << 20}) {
        if (std::find(cfg.sizes.begin(), cfg.sizes.end(), extra) == cfg.sizes.end()) cfg.sizes.push_back(extra);
      }
      std::sort(cfg.sizes.begin(), cfg.sizes.end());
    }
  }
  if (cfg.path.empty()) throw Error("--io: no FILE given (write --io FILE, or --io --model MODEL.gguf)");
  if (cfg.sizes.empty()) cfg.sizes = bench::parse_size_list(kDefaultSizes, "--sizes");
  cfg.engine = io::parse_io_engine(o.io_engine, "--io-engine");
  if (cfg.engine == io::IoEngine::Uring) {
    // One thread per point; the swept quantity is the reads in flight.
    cfg.lanes = bench::parse_lane_list(o.io_depth.empty() ? "1,2,4,8,16,32,64" : o.io_depth, "--io-depth");
  } else {
    if (!o.io_depth.empty()) throw Error("--io-depth: only applies with --io-engine uring");
    cfg.lanes = bench::parse_lane_list(o.lanes, "--lanes");
  }
  if (!(o.seconds > 0)) throw Error("--seconds: must be a positive number of seconds per point");
  cfg.seconds_per_point = o.seconds;
  if (!o.max_bytes.empty()) cfg.max_bytes_per_point = bench::parse_size(o.max_bytes, "--max-bytes");
  if (o.direct_only) cfg.modes = {bench::IoMode::Direct};
  else if (o.buffered_only) cfg.modes = {bench::IoMode::Buffered};
  else cfg.modes = {bench::IoMode::Direct, bench::IoMode::Buffered};
  cfg.seed = o.seed;
  cfg.buffered_fadv_random = !o.no_fadv_random;
  return cfg;
}

void run_io_bench_command(const BenchOptions& o) {
  bench::IoBenchConfig cfg = io_config_from(o);
  const std::vector<std::string> notes = bench::io_bench_notes(cfg);
  const size_t points = cfg.modes.size() * cfg.sizes.size() * cfg.lanes.size();
  std::fprintf(stderr, "io bench: %s, %zu points, %.2f s each\n", cfg.path.c_str(), points, cfg.seconds_per_point);
  size_t done = 0;
  cfg.on_row = [&](const bench::IoBenchRow& r) {
    std::fprintf(stderr, "  [%zu/%zu] %-8s %10s x%-3d %8.3f GB/s  p50 %9.1f us\n", ++done, points,
                 std::string(bench::io_mode_name(r.mode)).c_str(), bench::format_size(r.size_bytes).c_str(),
                 r.lanes, r.GBps, r.lat_us_p50);
  };
  const std::vector<bench::IoBenchRow> rows = bench::run_io_bench(cfg);
  std::string text;
  if (o.output == "json") {
    text = bench::format_io_json(rows);
  } else if (o.output == "csv") {
    text = bench::format_io_csv(rows);
  } else {
    text = bench::format_io_markdown(rows, notes);
  }
  if (o.output != "md") {
    for (const std::string& n : notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  }
  out(text);
}

// The machine conditions on stderr before a model benchmark, and a warning for
// each that makes its figures unrepresentative (working_set_bytes: what must
// fit in memory, 0 when the run streams).
void report_conditions(uint64_t working_set_bytes) {
  const MachineConditions c = read_machine_conditions();
  std::fprintf(stderr, "conditions: %s\n", describe(c).c_str());
  for (const std::string& w : condition_warnings(c, working_set_bytes)) std::fprintf(stderr, "warning: %s\n", w.c_str());
}

// The bytes of a model's files (every split), for the working-set check.
uint64_t model_file_bytes(const std::string& path) {
  uint64_t total = 0;
  for (const std::string& p : gguf::GgufModel::open(path).paths()) total += std::filesystem::file_size(p);
  return total;
}

bench::ModelBenchConfig model_config_from(const BenchOptions& o) {
  bench::ModelBenchConfig cfg;
  cfg.model_path = o.model_path;
  cfg.n_prompt = o.n_prompt;
  cfg.n_gen = o.n_gen;
  cfg.reps = o.reps;
  cfg.threads = bench::parse_int_list(o.threads, "-t", 1, 1024);
  cfg.io_threads = bench::parse_int_list(o.io_threads, "--io-threads", 1, 256);
  cfg.dense_weights = bench::parse_dense_list(o.dense_weights, "--dense-weights");
  cfg.resident_layout = bench::parse_layout_list(o.resident_layout);
  if (!o.moe_top_k.empty()) cfg.moe_top_k = bench::parse_int_list(o.moe_top_k, "--moe-top-k", 1, 1 << 16);
  cfg.cache_mb = bench::parse_cache_mb_list(o.cache_mb);
  cfg.prefetch = bench::parse_prefetch_list(o.prefetch);
  if (!o.expert_budget.empty()) cfg.expert_budget = bench::parse_int_list(o.expert_budget, "--expert-budget", 0, 1 << 16);
  if (!o.mtp.empty()) cfg.mtp = bench::parse_int_list(o.mtp, "--mtp", 0, 16);
  cfg.odirect = !o.no_odirect;
  cfg.load_all = o.load_all;
  cfg.cold = o.cold;
  cfg.kv_type = o.kv_type;
  cfg.route_replay = o.route_replay;
  cfg.save_usage = o.save_usage;
  cfg.io_engine = o.io_engine;
  if (!o.io_depth.empty()) {
    const std::vector<int> d = bench::parse_int_list(o.io_depth, "--io-depth", 1, 4096);
    if (d.size() != 1) throw Error("--io-depth: -m takes one depth (got " + o.io_depth + ")");
    cfg.io_depth = d.front();
  }
  cfg.seed = o.seed;
  return cfg;
}

void run_model_bench_command(const BenchOptions& o) {
  bench::ModelBenchConfig cfg = model_config_from(o);
  if (!o.io_ceiling.empty()) {
    cfg.ceiling = bench::load_io_ceiling(o.io_ceiling);
  } else if (o.measure_ceiling) {
    std::fprintf(stderr, "measuring the device ceiling on %s (1 s per point)\n", o.model_path.c_str());
    cfg.ceiling = bench::measure_ceiling(o.model_path, cfg.io_threads, cfg.odirect, 1.0,
                                           [](const bench::IoBenchRow& r) {
                                             std::fprintf(stderr, "  %-8s %10s x%-3d %8.3f GB/s\n",
                                                          std::string(bench::io_mode_name(r.mode)).c_str(),
                                                          bench::format_size(r.size_bytes).c_str(), r.lanes, r.GBps);
                                           });
  }
  cfg.on_progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  report_conditions(o.load_all ? model_file_bytes(o.model_path) : 0);
  const std::vector<bench::ModelBenchRow> rows = bench::run_model_bench(cfg);
  std::string text;
  if (o.output == "json") {
    text = bench::format_bench_json(rows);
  } else if (o.output == "csv") {
    text = bench::format_bench_csv(rows);
  } else {
    text = bench::format_bench_markdown(rows);
  }
  out(text);
}

// --mem: the buffer the probe reads. The default is large against any
// last-level cache yet leaves the machine its memory; an explicit size that
// would push the machine into reclaim is refused rather than measured.
uint64_t mem_probe_bytes(const BenchOptions& o) {
  const uint64_t available = read_machine_conditions().mem_available;
  if (o.mem_size.empty()) {
    const uint64_t gib = uint64_t{1} << 30;
    return available > 0 ? std::clamp<uint64_t>(available / 4, uint64_t{64} << 20, gib) : gib;
  }
  const uint64_t bytes = bench::parse_size(o.mem_size, "--mem-size");
  if (available > 0 && bytes > available / 2) {
    throw Error("--mem-size: " + bench::format_size(bytes) + " is more than half of the " +
                bench::format_size(available) + " of memory available; choose a smaller buffer");
  }
  return bytes;
}

void run_mem_bench_command(const BenchOptions& o) {
  bench::MemBenchConfig cfg;
  cfg.bytes = mem_probe_bytes(o);
  const int cpus = std::max(1u, std::thread::hardware_concurrency());
  cfg.threads = o.threads_given ? bench::parse_int_list(o.threads, "-t", 1, 1024)
                                : (cpus > 1 ? std::vector<int>{1, cpus} : std::vector<int>{1});
  cfg.passes = o.reps_given ? o.reps : 5;
  // The roofline's numerator: what one decode token reads with everything resident.
  uint64_t per_token = 0;
  if (!o.model_path.empty()) per_token = tools::model_info(gguf::GgufModel::open(o.model_path)).sizing.decode_read_bytes;
  std::fprintf(stderr, "conditions: %s\n", describe(read_machine_conditions()).c_str());
  std::fprintf(stderr, "memory read bandwidth: %s buffer, %d timed pass(es) per point\n",
               bench::format_size(cfg.bytes).c_str(), cfg.passes);
  const std::vector<bench::MemBenchRow> rows = bench::run_mem_bench(cfg, [](const bench::MemBenchRow& r) {
    std::fprintf(stderr, "  %d thread(s): %.2f GB/s best, %.2f median\n", r.threads, r.GBps_best, r.GBps_median);
  });
  out(bench::format_mem_bench(rows, per_token, o.model_path, o.output));
}

void run_bench(const BenchOptions& o) {
  if (o.conditions) {
    out(describe(read_machine_conditions()) + "\n");
    return;
  }
  if (o.mem && o.io) throw Error("bench: --mem and --io are two benchmarks; run them one at a time");
  if (o.mem) {
    run_mem_bench_command(o);
    return;
  }
  if (o.io) {
    run_io_bench_command(o);
    return;
  }
  if (!o.model_path.empty()) {
    run_model_bench_command(o);
    return;
  }
  throw Error(
      "bench: choose a mode: --io FILE (storage random-read ceiling), --mem (memory read bandwidth) or -m MODEL "
      "(model benchmark)");
}

}  // namespace

void register_bench(CLI::App& app) {
  auto opts = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "benchmarks: --io FILE measures the storage random-read ceiling; -m MODEL benchmarks the model");
  cmd->add_option("-m,--model", opts->model_path,
                  "GGUF model (or a stored model name, as for run); with --io: default FILE and default --sizes (its "
                  "expert-slice sizes + 4K + 1M)")
      ->transform(model_reference("-m"));
  cmd->add_option("-o,--output", opts->output, "output format")
      ->check(CLI::IsMember({"md", "json", "csv"}))
      ->capture_default_str();
  CLI::Option* io = cmd->add_option("--io", opts->io_path,
                                     "random-read benchmark of FILE (default with --model: the model file)")
                        ->expected(0, 1);
  cmd->add_option("--sizes", opts->sizes, "read sizes, comma separated, e.g. 4K,64K,1M,2.5M (default 4K,64K,1M,4M)");
  cmd->add_option("--lanes", opts->lanes, "concurrent reader threads per point, comma separated")
      ->capture_default_str();
  cmd->add_option("--seconds", opts->seconds, "seconds per point")->capture_default_str();
  cmd->add_option("--io-engine", opts->io_engine,
                  "pread (blocking reads, one per --lanes / --io-threads thread) or uring (one thread, --io-depth "
                  "reads in flight)")
      ->capture_default_str();
  cmd->add_option("--io-depth", opts->io_depth,
                  "uring: reads in flight; --io: comma separated (default 1,2,4,8,16,32,64); -m: one value (default 8)");
  cmd->add_option("--max-bytes", opts->max_bytes, "stop a point early after this many bytes (e.g. 2G)");
  CLI::Option* d = cmd->add_flag("--direct", opts->direct_only, "only O_DIRECT reads");
  CLI::Option* b = cmd->add_flag("--buffered", opts->buffered_only, "only buffered (page cache) reads");
  CLI::Option* both = cmd->add_flag("--both", opts->both, "O_DIRECT and buffered (default)");
  d->excludes(b)->excludes(both);
  b->excludes(both);
  cmd->add_flag("--no-fadv-random", opts->no_fadv_random,
                "buffered: keep the kernel's default readahead instead of POSIX_FADV_RANDOM");
  cmd->add_option("--seed", opts->seed, "seed of the random offsets (--io) or prompt tokens (-m)")
      ->capture_default_str();
  // memory mode
  cmd->add_flag("--mem", opts->mem,
                "measure the memory read bandwidth (all threads streaming one buffer; -t: thread counts, default 1 "
                "and all CPUs; -r: timed passes, default 5); with -m, also the model's in-RAM decode roofline: "
                "bandwidth / weight bytes read per decode token");
  cmd->add_option("--mem-size", opts->mem_size,
                  "--mem: buffer size, e.g. 2G (default 1 GiB, or a quarter of MemAvailable where less)");
  // model mode
  cmd->add_option("-p,--n-prompt", opts->n_prompt, "-m: prompt tokens per rep")->capture_default_str();
  cmd->add_option("-n,--n-gen", opts->n_gen, "-m: decode steps per rep")->capture_default_str();
  CLI::Option* reps = cmd->add_option("-r,--repetitions", opts->reps, "-m: repetitions per configuration")
                           ->capture_default_str();
  CLI::Option* threads =
      cmd->add_option("-t,--threads", opts->threads,
                      "-m: compute threads, comma separated (swept); --mem: reading threads (default 1 and all CPUs)")
          ->capture_default_str();
  cmd->add_option("--io-threads", opts->io_threads, "-m: expert read lanes, comma separated (swept)")
      ->capture_default_str();
  cmd->add_option("--dense-weights", opts->dense_weights, "-m: mmap|warm|anon, comma separated (swept)")
      ->capture_default_str();
  cmd->add_option("--resident-layout", opts->resident_layout,
                  "-m: packed|plain, comma separated (swept): layout of resident weights (same logits)")
      ->capture_default_str();
  // Routing top-k. `sluice run` spells it --moe-top-k because --top-k is its
  // sampling flag; bench does no sampling, so it also takes --top-k, the
  // spelling llama-bench users and the issue use.
  cmd->add_option("--moe-top-k,--top-k", opts->moe_top_k,
                  "-m: routed experts per token, comma separated (swept; default: the model's own)");
  cmd->add_option("--cache-mb", opts->cache_mb, "-m: expert cache budget in MiB: N|auto|off, comma separated (swept)")
      ->capture_default_str();
  cmd->add_option("--expert-budget", opts->expert_budget,
                  "-m: distinct experts per layer and micro-batch (0 = off), comma separated (swept); with --mtp it "
                  "caps the verify batch's union");
  cmd->add_option("--mtp", opts->mtp,
                  "-m: MTP drafts per step (0 = off), comma separated (swept); needs a model with a NextN block");
  cmd->add_option("--prefetch", opts->prefetch, "-m: off|prefill|auto|N, comma separated (swept): read the next layer's predicted experts early "
                  "(prefill: every predicted expert in prompt micro-batches, none at decode; N: each position's N "
                  "most probable at every batch size)")
      ->capture_default_str();
  cmd->add_flag("--no-odirect", opts->no_odirect, "-m: read experts through the page cache");
  cmd->add_flag("--load-all", opts->load_all, "-m: keep every expert resident");
  cmd->add_flag("--cold", opts->cold, "-m: drop the model files' cached pages before each rep");
  cmd->add_flag("--conditions", opts->conditions,
                "print the machine conditions that move benchmark figures (CPU, clock, governor, transparent huge "
                "pages, free memory, page cache, load) as one line and exit; -m prints them before it runs");
  cmd->add_option("--kv-type", opts->kv_type, "-m: KV cache element type f16|f32")->capture_default_str();
  cmd->add_option("--route-replay", opts->route_replay,
                  "-m: replace the router's expert choices by a recorded routing trace (JSONL), mapped onto the "
                  "model (docs/benchmarks.md); rows say route_replay");
  cmd->add_option("--save-usage", opts->save_usage,
                  "-m: write how often each (layer, expert) was routed, summed over every configuration, to FILE "
                  "(JSON) for `cache-sim --cache-warm`");
  CLI::Option* ceil_file =
      cmd->add_option("--io-ceiling", opts->io_ceiling, "-m: device ceiling JSON from `sluice bench --io FILE -o json`");
  CLI::Option* ceil_measure = cmd->add_flag(
      "--measure-ceiling", opts->measure_ceiling, "-m: measure the device ceiling on the model file first (1 s/point)");
  ceil_file->excludes(ceil_measure);
  cmd->callback([opts, io, reps, threads] {
    opts->io = io->count() > 0;
    opts->reps_given = reps->count() > 0;
    opts->threads_given = threads->count() > 0;
    run_bench(*opts);
  });
}

}  // namespace sluice::cli
