// io_bench — measuring one (mode, size, lanes) point after another.
//
// Each point: open the file in the point's mode, (buffered) drop its cached
// pages, start `lanes` threads that wait on one start signal, then each lane
// reads at random aligned offsets until the deadline or the shared byte budget
// is reached, timing every pread. The point's wall time runs from the start
// signal to the last lane's stop, so GB/s counts the tail read of every lane.
#include "bench/io_bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <latch>
#include <memory>
#include <set>
#include <thread>

#include "gguf/expert_layout.h"
#include "gguf/gguf.h"
#include "io/aligned_buffer.h"
#include "io/direct_reader.h"
#include "io/residency.h"
#include "util/clock.h"
#include "util/error.h"

namespace sluice::bench {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(1ull << 30));
  return buf;
}

uint64_t physical_ram_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return (pages > 0 && page > 0) ? uint64_t(pages) * uint64_t(page) : 0;
}

void validate(const IoBenchConfig& cfg) {
  if (cfg.path.empty()) throw Error("io bench: no file given");
  if (cfg.sizes.empty()) throw Error("io bench: no read sizes given");
  for (uint64_t s : cfg.sizes)
    if (s == 0) throw Error("io bench: read size 0 is not allowed");
  if (cfg.lanes.empty()) throw Error("io bench: no lane counts given");
  for (int l : cfg.lanes)
    if (l < 1 || l > kMaxIoBenchLanes)
      throw Error("io bench: lane count " + std::to_string(l) + " is out of range (1.." +
                  std::to_string(kMaxIoBenchLanes) + ")");
  if (cfg.modes.empty()) throw Error("io bench: no mode (direct/buffered) selected");
  if (!(cfg.seconds_per_point > 0) || !std::isfinite(cfg.seconds_per_point))
    throw Error("io bench: seconds per point must be a positive number");
}

// What one lane measured. Written only by its own thread until joined.
struct LaneResult {
  std::vector<uint64_t> lat_ns;
  Clock::time_point stopped{};
  std::exception_ptr error;
};

// Fills a measured row's reads, bytes, rates and latency figures from its
// per-read latencies (ns) and wall time; row.read_bytes must be set.
void finish_row(IoBenchRow& row, std::vector<uint64_t>& lat_ns, double seconds) {  // sorts lat_ns
  row.reads = lat_ns.size();
  row.bytes = row.reads * row.read_bytes;
  row.seconds = seconds;
  if (row.seconds > 0) {
    row.GBps = double(row.bytes) / row.seconds / 1e9;
    row.iops = double(row.reads) / row.seconds;
  }
  const LatencySummary lat = summarize_latencies(lat_ns);
  row.lat_us_mean = lat.mean_us;
  row.lat_us_p50 = lat.p50_us;
  row.lat_us_p99 = lat.p99_us;
}

IoBenchRow run_point(const io::FdFile& file, IoMode mode, uint64_t size, int lanes,
                     const IoBenchConfig& cfg, uint64_t point_seed) {
  const uint64_t read_bytes = io_read_bytes(mode, size);
  if (read_bytes > file.size()) {
    fail(file.path(), "file is " + std::to_string(file.size()) + " bytes, smaller than one " +
                          std::to_string(read_bytes) + "-byte read; use a larger file or smaller --sizes");
  }
  // Start cold: without this a buffered point would measure pages earlier
  // points (or other programs) left in the page cache. Best effort by design.
  if (mode == IoMode::Buffered) (void)io::drop_file_pages(file.fd());

  const auto budget = cfg.max_bytes_per_point;
  const auto duration = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(cfg.seconds_per_point));
  std::vector<LaneResult> results(static_cast<size_t>(lanes));
  std::atomic<uint64_t> claimed{0};  // bytes lanes have committed to read (budget)
  std::atomic<bool> stop{false};     // set when any lane fails
  Clock::time_point start;           // written before `go` opens, read after
  std::latch go(1);

  auto lane_body = [&](int lane) {
    LaneResult& res = results[static_cast<size_t>(lane)];
    try {
      RandomOffsets offsets(file.size(), read_bytes, point_seed + 0x100000001B3ull * uint64_t(lane + 1));
      io::AlignedBuffer buf(read_bytes);
      res.lat_ns.reserve(4096);
      go.wait();
      const Clock::time_point deadline = start + duration;
      while (!stop.load(std::memory_order_relaxed)) {
        if (budget != 0 && claimed.fetch_add(read_bytes, std::memory_order_relaxed) >= budget) break;
        const uint64_t at = offsets.next();
        const Clock::time_point t0 = Clock::now();
        file.read_exact(buf.data(), read_bytes, at);
        const Clock::time_point t1 = Clock::now();
        res.lat_ns.push_back(uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
        if (t1 >= deadline) break;
      }
    } catch (...) {
      res.error = std::current_exception();
      stop.store(true, std::memory_order_relaxed);
    }
    res.stopped = Clock::now();
  };

  {
    std::vector<std::jthread> threads;
    threads.reserve(static_cast<size_t>(lanes));
    try {
      for (int l = 0; l < lanes; ++l) threads.emplace_back(lane_body, l);
    } catch (...) {
      stop.store(true);
      start = Clock::now();
      go.count_down();  // release the lanes already started so they can be joined
      throw;
    }
    start = Clock::now();
    go.count_down();
  }  // joins every lane

  IoBenchRow row;
  row.mode = mode;
  row.size_bytes = size;
  row.read_bytes = read_bytes;
  row.lanes = lanes;
  std::vector<uint64_t> all;
  Clock::time_point last = start;
  for (LaneResult& r : results) {
    if (r.error) std::rethrow_exception(r.error);
    all.insert(all.end(), r.lat_ns.begin(), r.lat_ns.end());
    last = std::max(last, r.stopped);
  }
  finish_row(row, all, seconds_since(start, last));
  return row;
}

// One thread, `depth` reads in flight through an io_uring, each at a fresh
// random offset as soon as the previous one in its slot completes.
IoBenchRow run_point_uring(const io::FdFile& file, IoMode mode, uint64_t size, int depth, const IoBenchConfig& cfg,
                           uint64_t point_seed) {
  const uint64_t read_bytes = io_read_bytes(mode, size);
  if (read_bytes > file.size()) {
    fail(file.path(), "file is " + std::to_string(file.size()) + " bytes, smaller than one " +
                          std::to_string(read_bytes) + "-byte read; use a larger file or smaller --sizes");
  }
  if (read_bytes > UINT32_MAX) fail(file.path(), "io_uring reads are at most 4 GiB");
  if (mode == IoMode::Buffered) (void)io::drop_file_pages(file.fd());
  io::UringQueue q(static_cast<unsigned>(depth), "--io-depth " + std::to_string(depth));
  RandomOffsets offsets(file.size(), read_bytes, point_seed);
  std::vector<io::AlignedBuffer> bufs;
  for (int i = 0; i < depth; ++i) bufs.emplace_back(read_bytes);
  std::vector<Clock::time_point> issued(static_cast<size_t>(depth));
  std::vector<uint64_t> lat;
  lat.reserve(4096);
  const auto duration = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg.seconds_per_point));
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + duration;
  uint64_t claimed = 0;
  auto issue = [&](size_t slot) {
    if (cfg.max_bytes_per_point != 0 && claimed >= cfg.max_bytes_per_point) return;
    claimed += read_bytes;
    issued[slot] = Clock::now();
    q.prepare(file.fd(), bufs[slot].data(), static_cast<uint32_t>(read_bytes), offsets.next(), slot);
  };
  for (size_t s = 0; s < bufs.size(); ++s) issue(s);
  bool stopping = false;
  while (q.in_flight() > 0) {
    const io::UringQueue::Completion c = q.wait();
    const Clock::time_point t1 = Clock::now();
    if (c.res != static_cast<int>(read_bytes)) {
      fail(file.path(), "io_uring read of " + std::to_string(read_bytes) + " bytes returned " +
                            (c.res < 0 ? std::string(std::strerror(-c.res)) : std::to_string(c.res)));
    }
    lat.push_back(uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - issued[c.tag]).count()));
    if (t1 >= deadline) stopping = true;
    if (!stopping) issue(c.tag);
  }
  IoBenchRow row;
  row.mode = mode;
  row.engine = io::IoEngine::Uring;
  row.size_bytes = size;
  row.read_bytes = read_bytes;
  row.lanes = depth;
  finish_row(row, lat, seconds_since(start));
  return row;
}

// |log(a/b)|: how far apart two positive quantities are, symmetric in ratio.
double ratio_distance(double a, double b) { return std::fabs(std::log(a / b)); }

}  // namespace

std::string_view io_mode_name(IoMode m) { return m == IoMode::Direct ? "direct" : "buffered"; }

uint64_t io_read_bytes(IoMode mode, uint64_t size) {
  return mode == IoMode::Direct ? io::align_up(size) : size;
}

RandomOffsets::RandomOffsets(uint64_t file_size, uint64_t read_bytes, uint64_t seed) : state_(seed) {
  if (read_bytes == 0) throw Error("io bench: read size 0 is not allowed");
  if (read_bytes > file_size) {
    throw Error("io bench: a " + std::to_string(read_bytes) + "-byte read does not fit in a " +
                std::to_string(file_size) + "-byte file");
  }
  // Aligned offsets 0, 4096, ..., align_down(file_size - read_bytes).
  slots_ = (file_size - read_bytes) / io::kIoAlign + 1;
}

uint64_t RandomOffsets::next() {
  const uint64_t r = splitmix64(state_);
  const uint64_t slot = uint64_t((unsigned __int128)r * slots_ >> 64);  // uniform in [0, slots_)
  return slot * io::kIoAlign;
}

LatencySummary summarize_latencies(std::vector<uint64_t>& ns) {
  LatencySummary s;
  if (ns.empty()) return s;
  const size_t n = ns.size();
  long double sum = 0;
  for (uint64_t v : ns) sum += v;
  s.mean_us = double(sum / n / 1000.0L);
  // Nearest rank: the k-th smallest with k = ceil(p * n), 1-based.
  auto rank = [&](double p) {
    size_t k = size_t(std::ceil(p * double(n)));
    k = std::clamp<size_t>(k, 1, n);
    std::nth_element(ns.begin(), ns.begin() + long(k - 1), ns.end());
    return double(ns[k - 1]) / 1000.0;
  };
  s.p50_us = rank(0.50);
  s.p99_us = rank(0.99);
  return s;
}

double ceiling_GBps(const std::vector<IoBenchRow>& rows, uint64_t size, int lanes, bool direct) {
  const IoMode mode = direct ? IoMode::Direct : IoMode::Buffered;
  const IoBenchRow* best = nullptr;
  double best_size_d = 0, best_lane_d = 0;
  const double want_size = double(std::max<uint64_t>(size, 1));
  const double want_lanes = double(std::max(lanes, 1));
  for (const IoBenchRow& r : rows) {
    if (r.mode != mode || r.engine != io::IoEngine::Pread || r.size_bytes == 0 || r.lanes < 1) continue;
    const double sd = ratio_distance(double(r.size_bytes), want_size);
    const double ld = ratio_distance(double(r.lanes), want_lanes);
    bool better = best == nullptr || sd < best_size_d;
    if (!better && sd == best_size_d) {
      better = ld < best_lane_d || (ld == best_lane_d && r.lanes > best->lanes);
    }
    if (better) {
      best = &r;
      best_size_d = sd;
      best_lane_d = ld;
    }
  }
  if (best == nullptr) {
    throw Error(std::string("io bench: no ") + std::string(io_mode_name(mode)) +
                " measurements to take a ceiling from");
  }
  return best->GBps;
}

std::vector<IoBenchRow> best_rows(const std::vector<IoBenchRow>& rows) {
  std::vector<IoBenchRow> best;
  for (const IoBenchRow& r : rows) {
    auto it = std::find_if(best.begin(), best.end(), [&](const IoBenchRow& b) {
      return b.mode == r.mode && b.engine == r.engine && b.size_bytes == r.size_bytes;
    });
    if (it == best.end()) {
      best.push_back(r);
    } else if (r.GBps > it->GBps) {
      *it = r;
    }
  }
  return best;
}

std::vector<uint64_t> expert_slice_sizes(const gguf::GgufModel& model) {
  std::set<uint64_t> sizes;
  if (gguf::expert_layout(model) == gguf::ExpertLayout::ExpertMajor) {
    for (const gguf::LayerExpertParts& lp : gguf::layer_expert_parts(model)) {
      if (!lp.present()) continue;
      const auto& r = lp.experts[0];
      uint64_t from = UINT64_MAX, to = 0;
      for (const gguf::ByteRange& p : r) from = std::min(from, p.offset), to = std::max(to, p.offset + p.bytes);
      sizes.insert(to - from);
    }
    return {sizes.begin(), sizes.end()};
  }
  for (const gguf::TensorInfo& t : model.tensors()) {
    if (t.ne.size() != 3 || t.ne[2] == 0) continue;
    if (t.name.find("_exps") == std::string::npos) continue;
    sizes.insert(model.expert_range(t, 0).bytes);
  }
  return {sizes.begin(), sizes.end()};
}

std::vector<std::string> io_bench_notes(const IoBenchConfig& cfg) {
  std::vector<std::string> notes;
  const bool wants_direct = std::count(cfg.modes.begin(), cfg.modes.end(), IoMode::Direct) > 0;
  const bool wants_buffered = std::count(cfg.modes.begin(), cfg.modes.end(), IoMode::Buffered) > 0;
  std::unique_ptr<io::FdFile> f;
  try {
    f = io::open_fd_file(cfg.path, false);
  } catch (const Error& e) {
    notes.push_back(e.what());
    return notes;
  }
  const uint64_t ram = physical_ram_bytes();
  if (wants_buffered && ram != 0 && f->size() < ram) {
    notes.push_back(cfg.path + " (" + gib(f->size()) + ") is smaller than RAM (" + gib(ram) +
                    "): buffered points start cold (its pages are dropped before each point), but "
                    "reads later in a point can hit pages cached earlier in that point, so buffered "
                    "numbers may be cache-inflated; direct numbers bypass the cache");
  }
  if (wants_buffered) {
    notes.push_back(cfg.buffered_fadv_random
                        ? "buffered reads use POSIX_FADV_RANDOM (no readahead), so each read costs only its own bytes"
                        : "buffered reads use the kernel's default readahead (--no-fadv-random)");
  }
  if (wants_direct && !io::open_fd_file(cfg.path, true)) {
    notes.push_back(cfg.path + ": the filesystem refuses O_DIRECT; direct points were skipped");
  }
  for (uint64_t s : cfg.sizes) {
    if (wants_direct && io_read_bytes(IoMode::Direct, s) != s) {
      notes.push_back("direct reads of " + format_size(s) + " are rounded up to " +
                      format_size(io_read_bytes(IoMode::Direct, s)) + " (O_DIRECT needs 4 KiB multiples); "
                      "GB/s counts the bytes actually read");
    }
  }
  return notes;
}

std::vector<IoBenchRow> run_io_bench(const IoBenchConfig& cfg) {
  validate(cfg);
  std::vector<IoBenchRow> rows;
  uint64_t point = 0;
  for (IoMode mode : cfg.modes) {
    std::unique_ptr<io::FdFile> file = io::open_fd_file(cfg.path, mode == IoMode::Direct);
    if (!file) {
      const bool only_direct = std::all_of(cfg.modes.begin(), cfg.modes.end(),
                                           [](IoMode m) { return m == IoMode::Direct; });
      if (only_direct) {
        fail(cfg.path, "the filesystem refuses O_DIRECT, so direct reads cannot be measured; use --buffered");
      }
      point += cfg.sizes.size() * cfg.lanes.size();
      continue;
    }
    // Random access: stop the kernel reading ahead, which would charge each
    // read for neighbouring pages it never asked for.
    if (mode == IoMode::Buffered && cfg.buffered_fadv_random) {
      (void)::posix_fadvise(file->fd(), 0, 0, POSIX_FADV_RANDOM);
    }
    for (uint64_t size : cfg.sizes) {
      for (int lanes : cfg.lanes) {
        uint64_t seed_state = cfg.seed ^ (0xD1B54A32D192ED03ull * ++point);
        IoBenchRow row = cfg.engine == io::IoEngine::Uring
                             ? run_point_uring(*file, mode, size, lanes, cfg, splitmix64(seed_state))
                             : run_point(*file, mode, size, lanes, cfg, splitmix64(seed_state));
        if (cfg.on_row) cfg.on_row(row);
        rows.push_back(row);
      }
    }
  }
  return rows;
}

}  // namespace sluice::bench
