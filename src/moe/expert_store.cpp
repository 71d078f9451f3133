// ExpertStore: routed experts read on demand into reusable aligned slots.
//
// Thread-safety contract:
//  - fetch(), expert_bytes(), stats() and direct_io() may be called from any
//    thread; the slot pool is guarded by a mutex.
//  - A Batch is meant for one consumer thread; its next_ready()/view() are
//    internally locked, so misuse from two threads is still memory-safe.
//  - Lane threads only touch a Batch through read_done(); the Batch's
//    destructor waits until every job it submitted has reported back.
//  - Every Batch must be destroyed before the store (it borrows slots).
//  - Cache (cfg.cache_bytes > 0): the ExpertCache is internally locked. A hit
//    is pinned by the Batch at fetch(); a miss is read into its own buffer and
//    inserted (pinned) by the lane thread that completes it, under the Batch's
//    lock — only complete, error-free reads are inserted, so another Batch
//    never sees a half-read expert. Lock order: Batch::State::mu -> cache.
//  - cfg.on_resident (the model's packed layout) is applied by that same lane,
//    outside the Batch's lock, after the last read and before the expert is
//    marked ready or inserted, so no reader and no other Batch ever sees its
//    bytes between layouts; the view's `packed` flag travels with the cached
//    payload. Streamed experts (cache off) are transformed the same way, by
//    the lane that completes them, where the fetch asked
//    (FetchOptions::transform_streamed); --load-all experts are transformed
//    once at construction.
#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "io/aligned_buffer.h"
#include "moe/aligned_reads.h"
#include "moe/expert_cache.h"
#include "moe/read_lanes.h"
#include "moe/expert_store.h"
#include "util/error.h"

namespace sluice::moe {

namespace {

using Clock = std::chrono::steady_clock;

// Pieces larger than this are split so that one big expert is read by several
// lanes at once. 1 MiB keeps NVMe queues busy without tiny syscalls.
constexpr uint64_t kMaxChunk = uint64_t{1} << 20;

uint64_t ns_since(Clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

// Waits for a fixed number of jobs (used by load_all at construction).
class Latch final : public ReadOwner {
 public:
  explicit Latch(int n) : left_(n) {}
  void read_done(int, uint64_t, std::exception_ptr err) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (err && !error_) error_ = err;
    if (--left_ == 0) cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return left_ == 0; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
  std::exception_ptr error_;
};

// Buffers of evicted (or uncached) experts, kept for the next misses. Why:
// a fresh mmap per miss costs a page fault and a zeroed page per 4 KiB when
// the O_DIRECT read first touches it (about 650 per 2.5 MiB expert), plus the
// munmap's TLB shootdown at eviction — CPU time the read lanes take from the
// compute threads on every miss. At steady state an insert evicts about one
// expert per miss, so a small pool serves every miss without the kernel.
// Holds at most `max_bytes` (outside the cache budget). Thread-safe.
class BufferPool {
 public:
  explicit BufferPool(uint64_t max_bytes) : max_bytes_(max_bytes) {}
  // A buffer of exactly align_up(n) bytes: a pooled one, else a new mapping.
  io::AlignedBuffer take(uint64_t n) {
    const uint64_t want = io::align_up(n);
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (size_t i = 0; i < free_.size(); ++i) {
        if (free_[i].size() != want) continue;
        io::AlignedBuffer b = std::move(free_[i]);
        free_[i] = std::move(free_.back());
        free_.pop_back();
        held_ -= want;
        return b;
      }
    }
    return io::AlignedBuffer(want);
  }
  void give(io::AlignedBuffer b) {
    if (b.empty()) return;
    std::lock_guard<std::mutex> lk(mu_);
    if (held_ + b.size() > max_bytes_) return;  // unmapped here, as before the pool
    held_ += b.size();
    free_.push_back(std::move(b));
  }

 private:
  const uint64_t max_bytes_;
  std::mutex mu_;
  std::vector<io::AlignedBuffer> free_;
  uint64_t held_ = 0;
};

// One expert's bytes as the cache holds them: the aligned covers of its
// parts, and the view into them. Its buffer goes back to the pool when the
// cache drops it.
struct CachedExpert final : CachePayload {
  CachedExpert(uint64_t bytes, std::shared_ptr<BufferPool> p) : buf(p->take(bytes)), pool(std::move(p)) {}
  ~CachedExpert() override { pool->give(std::move(buf)); }
  io::AlignedBuffer buf;
  ExpertView view;
  std::shared_ptr<BufferPool> pool;
};

// How one expert's three parts map onto reads: parts sorted in file order,
// parts whose aligned covers touch merged into one extent (one read), each
// extent laid out at the next aligned position of the destination.
struct ExpertLayout {
  struct Part {
    gguf::ByteRange r;
    size_t which;  // 0 gate, 1 up, 2 down
  };
  struct Extent {
    size_t first = 0, last = 0;  // parts [first, last)
    uint64_t from = 0, to = 0;   // file bytes
  };
  std::array<Part, 3> parts;
  std::array<Extent, 3> extents;
  size_t n_extents = 0;
  uint64_t footprint = 0;  // destination bytes needed
  uint64_t bytes = 0;      // the expert's own bytes (gate+up+down)
};

}  // namespace

struct ExpertStore::Impl {
  const gguf::GgufModel& model;
  std::vector<gguf::LayerExpertParts> layers;  // by layer; !present(): no experts
  ExpertStoreConfig cfg;
  std::vector<SplitFiles> files;  // by split
  bool all_direct = false;
  uint64_t slot_bytes = 0;        // widest expert footprint (aligned covers of its parts)

  LaneStats lane_stats;
  std::atomic<uint64_t> experts_read{0};
  std::atomic<uint64_t> experts_hit{0};
  std::atomic<uint64_t> experts_unused{0};  // speculative reads never used
  std::atomic<uint64_t> bytes_hit{0};
  std::atomic<uint64_t> experts_transformed{0};  // cfg.on_resident applied
  std::unique_ptr<ExpertCache> cache;  // null: cache off
  std::shared_ptr<BufferPool> pool;    // with the cache: recycled expert buffers
  std::atomic<uint64_t> stall_ns{0};

  // Reusable slots: one per in-flight expert; free_slots lists the idle ones.
  std::mutex slot_mu;
  std::vector<io::AlignedBuffer> slots;
  std::vector<int> free_slots;

  // load_all: each layer's expert bytes, resident as a few runs (file ranges
  // whose aligned covers touch: the three stacked tensors, or one run for an
  // expert-major layer), and every expert's view into them.
  struct ResidentLayer {
    std::vector<io::AlignedBuffer> runs;
    std::vector<ExpertView> views;  // by expert
  };
  std::vector<ResidentLayer> resident;

  // Route traces: per layer, the last fetch() and its hits (guarded by fetch_mu).
  mutable std::mutex fetch_mu;
  std::vector<FetchRecord> last_fetch;

  std::unique_ptr<ReadLanes> lanes;  // last: joined first on destruction

  Impl(const gguf::GgufModel& m, std::vector<gguf::LayerExpertParts> l, const ExpertStoreConfig& c)
      : model(m), layers(std::move(l)), cfg(c) {}

  const gguf::LayerExpertParts& parts(int layer) const { return layers[static_cast<size_t>(layer)]; }

  void check_layer(int layer) const {
    if (layer < 0 || static_cast<size_t>(layer) >= layers.size()) {
      throw Error("expert store: layer " + std::to_string(layer) + " out of range (model has " +
                  std::to_string(layers.size()) + " layers)");
    }
    if (!layers[static_cast<size_t>(layer)].present()) {
      throw Error("expert store: layer " + std::to_string(layer) + " has no experts");
    }
  }

  std::vector<int> acquire_slots(size_t k) {
    std::lock_guard<std::mutex> lk(slot_mu);
    std::vector<int> ids;
    ids.reserve(k);
    while (ids.size() < k) {
      if (free_slots.empty()) {
        slots.emplace_back(slot_bytes);  // grows to the high-water mark, then never again
        ids.push_back(static_cast<int>(slots.size() - 1));
      } else {
        ids.push_back(free_slots.back());
        free_slots.pop_back();
      }
    }
    return ids;
  }

  void release_slots(const std::vector<int>& ids) {
    std::lock_guard<std::mutex> lk(slot_mu);
    free_slots.insert(free_slots.end(), ids.begin(), ids.end());
  }

  uint8_t* slot_data(int id) {
    std::lock_guard<std::mutex> lk(slot_mu);  // slots may be growing on another thread
    return slots[static_cast<size_t>(id)].data();
  }

  ExpertLayout layout(int layer, int expert) const {
    const auto& ranges = parts(layer).experts[static_cast<size_t>(expert)];
    ExpertLayout lo;
    for (size_t p = 0; p < 3; ++p) {
      lo.parts[p] = {ranges[p], p};
      lo.bytes += lo.parts[p].r.bytes;
    }
    auto& pr = lo.parts;
    std::sort(pr.begin(), pr.end(), [](const ExpertLayout::Part& a, const ExpertLayout::Part& b) {
      return a.r.split != b.r.split ? a.r.split < b.r.split : a.r.offset < b.r.offset;
    });
    for (size_t p = 0; p < 3;) {
      uint64_t from = pr[p].r.offset;
      uint64_t to = from + pr[p].r.bytes;
      size_t q = p + 1;
      while (q < 3 && pr[q].r.split == pr[p].r.split && io::align_down(pr[q].r.offset) <= io::align_up(to)) {
        to = std::max(to, pr[q].r.offset + pr[q].r.bytes);
        ++q;
      }
      lo.extents[lo.n_extents++] = {p, q, from, to};
      lo.footprint += cover_bytes(from, to - from);
      p = q;
    }
    return lo;
  }

  // Appends the reads that bring the expert into `dst` (>= lo.footprint
  // bytes, 4 KiB aligned) and returns where its parts will be.
  ExpertView plan(const ExpertLayout& lo, uint8_t* dst, std::vector<PlannedRead>& reads) const {
    const void* ptr[3] = {};
    uint64_t pos = 0;  // next free aligned byte in dst
    for (size_t x = 0; x < lo.n_extents; ++x) {
      const ExpertLayout::Extent& ex = lo.extents[x];
      const gguf::ByteRange& head = lo.parts[ex.first].r;
      uint8_t* first = plan_covering_read(files.at(head.split), ex.from, ex.to - ex.from, dst + pos,
                                          kMaxChunk, reads);
      for (size_t j = ex.first; j < ex.last; ++j) {
        ptr[lo.parts[j].which] = first + (lo.parts[j].r.offset - ex.from);
      }
      pos += cover_bytes(ex.from, ex.to - ex.from);
    }
    return {ptr[0], ptr[1], ptr[2]};
  }

  void load_everything();
  void transform_resident();
};

struct ExpertStore::Batch::State final : ReadOwner {
  ExpertStore::Impl* store = nullptr;
  int layer = 0;
  std::vector<int> experts;
  std::vector<ExpertView> views;
  std::vector<int> slot_ids;
  // Cache on: per expert, the pin on its cache entry (a hit, or a completed
  // read once inserted) or, until then, the buffer its reads land in.
  std::vector<ExpertCache::Pin> pins;
  std::vector<std::unique_ptr<CachedExpert>> pending;
  std::vector<uint64_t> bytes_left;  // per expert: planned bytes not yet read
  std::vector<uint64_t> footprint;   // per expert: cache accounting bytes
  // Cache off: per expert, apply cfg.on_resident after its read (empty: none).
  std::vector<uint8_t> transform;
  // FetchOptions::speculative: queued as speculative reads. With a cache,
  // hits are also peeked and reads wait in `pending` until use(); then, per
  // expert (empty without a cache): whether use() came, whether its read
  // completed in full (else nothing to count as unused), and a hit's bytes.
  bool speculative = false;
  std::vector<uint8_t> used;
  std::vector<uint8_t> read_in_full;
  std::vector<uint64_t> hit_bytes;

  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> reads_left;  // per expert
  std::vector<int> ready;       // expert indices in completion order
  std::vector<char> taken;      // per expert: returned by next_ready()
  size_t n_taken = 0;
  int outstanding = 0;          // jobs not yet reported back
  std::exception_ptr error;
  std::atomic<bool> abandoned{false};

  ~State() {
    abandoned = true;  // skip reads that have not started
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [this] { return outstanding == 0; });
    }
    for (size_t i = 0; i < read_in_full.size(); ++i)
      if (read_in_full[i] && !used[i]) store->experts_unused += 1;
    if (store && !slot_ids.empty()) store->release_slots(slot_ids);
  }

  // Adds which expert failed to the lane's "PATH: read ... failed: CAUSE".
  std::exception_ptr with_context(std::exception_ptr err, int item) const {
    try {
      std::rethrow_exception(err);
    } catch (const Error& e) {
      return std::make_exception_ptr(Error(std::string(e.what()) + " (expert " +
                                           std::to_string(experts[static_cast<size_t>(item)]) +
                                           " of layer " + std::to_string(layer) + ")"));
    } catch (...) {
      return std::current_exception();
    }
  }

  // Applies cfg.on_resident to the bytes of v (expert `item`, read in full)
  // with `lk` (on mu) released meanwhile, as other lanes report. Safe: this
  // job still counts in `outstanding`, so the State lives on, and the expert
  // is neither in `ready` nor in the cache yet, so nobody reads its bytes.
  // On success sets v.packed and counts it; if the transform throws, records
  // the error (with the expert's context) and returns false.
  bool relay_outside_lock(std::unique_lock<std::mutex>& lk, ExpertView& v, int item) {
    lk.unlock();
    std::exception_ptr err;
    try {
      store->cfg.on_resident(layer, const_cast<void*>(v.gate), const_cast<void*>(v.up), const_cast<void*>(v.down));
      v.packed = true;
    } catch (...) {
      err = std::current_exception();
    }
    lk.lock();
    if (err) {
      if (!error) error = with_context(err, item);
      return false;
    }
    store->experts_transformed += 1;
    return true;
  }

  bool cancelled() const override { return abandoned.load(std::memory_order_relaxed); }

  void read_done(int item, uint64_t bytes, std::exception_ptr err) override {
    const size_t i = static_cast<size_t>(item);
    std::unique_lock<std::mutex> lk(mu);
    if (err && !error) error = with_context(err, item);
    bytes_left[i] -= std::min(bytes_left[i], bytes);
    const bool expert_done = --reads_left[i] == 0 && !err;
    // A cancelled read reports no error and no bytes: the expert is done but
    // was not read in full, so it is not counted as read.
    const bool in_full = expert_done && bytes_left[i] == 0;
    // Cache only what was read in full: a skipped (cancelled) or failed read
    // leaves bytes_left > 0 or sets error.
    bool keep = in_full && !error && !pending.empty() && pending[i];
    // A speculative read is re-laid at use(), by the consumer: a wrong guess
    // then costs disk time only, not a lane's CPU beside the compute threads.
    if (keep && store->cfg.on_resident && !speculative) {
      // Only this lane touches pending[i] until it is inserted below.
      CachedExpert& ce = *pending[i];
      if (relay_outside_lock(lk, ce.view, item)) {
        views[i] = ce.view;
      } else {
        keep = false;  // half re-laid bytes: never cached
      }
    }
    if (in_full && !error && !transform.empty() && transform[i]) {
      // A streamed expert the fetch asked to re-lay, read in full (a dropped
      // or cancelled one is never handed out); its slot is this Batch's alone.
      ExpertView v = views[i];
      if (relay_outside_lock(lk, v, item)) views[i] = v;
    }
    if (expert_done) ready.push_back(item);
    if (in_full) store->experts_read += 1;
    if (keep && speculative) {
      read_in_full[i] = 1;  // re-laid and cached at use(), if it comes
    } else if (keep) {
      pins[i] = store->cache->insert({layer, experts[i]}, footprint[i], std::move(pending[i]));
    }
    --outstanding;
    // Notify under the lock: the destructor may free this State as soon as it
    // can observe outstanding == 0, which needs the lock we still hold.
    cv.notify_all();
  }
};

// --load-all: applies cfg.on_resident to every resident expert, split over
// the CPUs (a pure byte transform per expert; they do not overlap).
void ExpertStore::Impl::transform_resident() {
  std::vector<std::pair<size_t, size_t>> todo;  // (layer, expert)
  for (size_t l = 0; l < resident.size(); ++l)
    for (size_t e = 0; e < resident[l].views.size(); ++e) todo.emplace_back(l, e);
  const size_t n_threads =
      std::max<size_t>(1, std::min<size_t>(todo.size(), std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  std::mutex err_mu;
  std::exception_ptr first_err;
  auto work = [&] {
    for (size_t k = next++; k < todo.size(); k = next++) {
      ExpertView& v = resident[todo[k].first].views[todo[k].second];
      try {
        cfg.on_resident(static_cast<int>(todo[k].first), const_cast<void*>(v.gate), const_cast<void*>(v.up),
                        const_cast<void*>(v.down));
        v.packed = true;
      } catch (...) {
        std::lock_guard<std::mutex> lk(err_mu);
        if (!first_err) first_err = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  if (first_err) std::rethrow_exception(first_err);
  experts_transformed += todo.size();
}

void ExpertStore::Impl::load_everything() {
  resident.resize(layers.size());
  std::vector<ReadLanes::Job> jobs;
  std::vector<PlannedRead> reads;
  struct Part {
    gguf::ByteRange r;
    uint32_t expert;
    uint32_t which;
  };
  for (size_t l = 0; l < layers.size(); ++l) {
    const gguf::LayerExpertParts& lp = layers[l];
    if (!lp.present()) continue;
    std::vector<Part> ps;
    ps.reserve(lp.n_expert() * 3);
    for (size_t e = 0; e < lp.experts.size(); ++e)
      for (uint32_t p = 0; p < 3; ++p) ps.push_back({lp.experts[e][p], static_cast<uint32_t>(e), p});
    std::sort(ps.begin(), ps.end(), [](const Part& a, const Part& b) {
      return a.r.split != b.r.split ? a.r.split < b.r.split : a.r.offset < b.r.offset;
    });
    ResidentLayer& rl = resident[l];
    std::vector<std::array<const void*, 3>> ptr(lp.n_expert());
    // Runs of parts whose aligned covers touch, as ExpertLayout merges them.
    for (size_t i = 0; i < ps.size();) {
      const uint64_t from = ps[i].r.offset;
      uint64_t to = from + ps[i].r.bytes;
      size_t j = i + 1;
      while (j < ps.size() && ps[j].r.split == ps[i].r.split && io::align_down(ps[j].r.offset) <= io::align_up(to)) {
        to = std::max(to, ps[j].r.offset + ps[j].r.bytes);
        ++j;
      }
      io::AlignedBuffer& buf = rl.runs.emplace_back(cover_bytes(from, to - from));
      const uint8_t* base = plan_covering_read(files.at(ps[i].r.split), from, to - from, buf.data(), kMaxChunk, reads);
      for (size_t k = i; k < j; ++k) ptr[ps[k].expert][ps[k].which] = base + (ps[k].r.offset - from);
      i = j;
    }
    rl.views.resize(lp.n_expert());
    for (size_t e = 0; e < ptr.size(); ++e) rl.views[e] = {ptr[e][0], ptr[e][1], ptr[e][2]};
  }
  Latch latch(static_cast<int>(reads.size()));
  for (const PlannedRead& r : reads) jobs.push_back({r, &latch, 0});
  lanes->submit(jobs);
  latch.wait();
  if (cfg.on_resident) transform_resident();
}

namespace {

std::vector<gguf::LayerExpertParts> stacked_parts(const gguf::GgufModel& model, const std::vector<LayerExperts>& layers) {
  std::vector<gguf::LayerExpertParts> out(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerExperts& le = layers[l];
    const int present = (le.gate != nullptr) + (le.up != nullptr) + (le.down != nullptr);
    if (present == 0) continue;
    if (present != 3) {
      throw Error("expert store: layer " + std::to_string(l) +
                  " has some but not all of gate/up/down expert tensors");
    }
    out[l] = gguf::stacked_layer_parts(model, static_cast<uint32_t>(l), *le.gate, *le.up, *le.down);
  }
  return out;
}

}  // namespace

ExpertStore::ExpertStore(const gguf::GgufModel& model, const std::vector<LayerExperts>& layers,
                         const ExpertStoreConfig& cfg)
    : ExpertStore(model, stacked_parts(model, layers), cfg) {}

ExpertStore::ExpertStore(const gguf::GgufModel& model, std::vector<gguf::LayerExpertParts> layers,
                         const ExpertStoreConfig& cfg)
    : impl_(std::make_unique<Impl>(model, std::move(layers), cfg)) {
  Impl& s = *impl_;
  if (cfg.io_threads < 1 || cfg.io_threads > 256) {
    throw Error("--io-threads: must be between 1 and 256 (got " + std::to_string(cfg.io_threads) +
                ")");
  }
  // Size the slots: the widest expert footprint of any layer (the table was
  // validated by gguf::layer_expert_parts / stacked_layer_parts).
  std::vector<bool> split_used(model.n_splits(), false);
  for (size_t l = 0; l < s.layers.size(); ++l) {
    const gguf::LayerExpertParts& lp = s.layers[l];
    for (size_t e = 0; e < lp.experts.size(); ++e) {
      for (const gguf::ByteRange& r : lp.experts[e]) split_used.at(r.split) = true;
      s.slot_bytes = std::max(s.slot_bytes, s.layout(static_cast<int>(l), static_cast<int>(e)).footprint);
    }
  }
  // Open only the splits that hold experts.
  const std::vector<std::string> paths = model.paths();
  s.files.resize(paths.size());
  s.all_direct = cfg.odirect;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (!split_used[i]) continue;
    SplitFiles f = open_split_files(paths[i], cfg.odirect, cfg.wrap_file);
    if (cfg.odirect && f.direct == nullptr) s.all_direct = false;
    s.files[i] = std::move(f);
  }
  s.lanes = std::make_unique<ReadLanes>(cfg.io_engine, cfg.io_threads, cfg.io_depth, s.lane_stats);
  if (cfg.load_all) {
    s.load_everything();
  } else if (cfg.cache_bytes > 0) {
    s.cache = std::make_unique<ExpertCache>(cfg.cache_bytes);
    // An eighth of the budget, at most 256 MiB: a decode layer's misses (k
    // experts) at any budget that holds more than a few tokens' worth.
    s.pool = std::make_shared<BufferPool>(std::min<uint64_t>(cfg.cache_bytes / 8, uint64_t{256} << 20));
  }
}

ExpertStore::~ExpertStore() = default;

ExpertStore::Batch ExpertStore::fetch(int layer, std::span<const int> experts, const FetchOptions& opt) {
  Impl& s = *impl_;
  s.check_layer(layer);
  if (!opt.transform_streamed.empty() && opt.transform_streamed.size() != experts.size())
    throw Error("expert store: " + std::to_string(opt.transform_streamed.size()) + " transform flags for " +
                std::to_string(experts.size()) + " experts of layer " + std::to_string(layer));
  const uint64_t n_expert = s.parts(layer).n_expert();
  std::vector<char> seen(n_expert, 0);
  for (int e : experts) {
    if (e < 0 || static_cast<uint64_t>(e) >= n_expert) {
      throw Error("expert store: expert " + std::to_string(e) + " out of range for layer " +
                  std::to_string(layer) + " (" + std::to_string(n_expert) + " experts)");
    }
    if (seen[static_cast<size_t>(e)]++) {
      throw Error("expert store: expert " + std::to_string(e) + " requested twice for layer " +
                  std::to_string(layer));
    }
  }

  auto st = std::make_unique<Batch::State>();
  st->store = &s;
  st->layer = layer;
  st->experts.assign(experts.begin(), experts.end());
  const size_t k = experts.size();
  st->views.resize(k);
  st->speculative = opt.speculative;
  st->reads_left.assign(k, 0);
  st->bytes_left.assign(k, 0);
  st->taken.assign(k, 0);

  if (s.cfg.load_all) {
    const auto& rl = s.resident[static_cast<size_t>(layer)];
    for (size_t i = 0; i < k; ++i) {
      st->views[i] = rl.views[static_cast<size_t>(experts[i])];
      st->ready.push_back(static_cast<int>(i));
    }
    return Batch(std::move(st));
  }

  std::vector<ReadLanes::Job> jobs;
  std::vector<PlannedRead> reads;
  if (s.cache) {
    st->pins.resize(k);
    st->pending.resize(k);
    st->footprint.assign(k, 0);
    if (opt.speculative) {
      st->used.assign(k, 0);
      st->read_in_full.assign(k, 0);
      st->hit_bytes.assign(k, 0);
    }
  } else {
    st->slot_ids = s.acquire_slots(k);
    if (s.cfg.on_resident && !opt.transform_streamed.empty())
      st->transform.assign(opt.transform_streamed.begin(), opt.transform_streamed.end());
  }
  for (size_t i = 0; i < k; ++i) {
    const ExpertLayout lo = s.layout(layer, experts[i]);
    uint8_t* dst = nullptr;
    if (s.cache) {
      ExpertCache::Pin pin = st->speculative ? s.cache->peek({layer, experts[i]}) : s.cache->acquire({layer, experts[i]});
      if (pin) {  // hit: resident and pinned for this Batch's lifetime
        st->views[i] = static_cast<const CachedExpert*>(pin.payload())->view;
        st->pins[i] = std::move(pin);
        if (st->speculative) {
          st->hit_bytes[i] = lo.bytes;  // counted at use()
        } else {
          s.experts_hit += 1;
          s.bytes_hit += lo.bytes;
        }
        continue;
      }
      st->pending[i] = std::make_unique<CachedExpert>(lo.footprint, s.pool);
      st->footprint[i] = st->pending[i]->buf.size();
      dst = st->pending[i]->buf.data();
    } else {
      dst = s.slot_data(st->slot_ids[i]);
    }
    st->views[i] = s.plan(lo, dst, reads);
    if (s.cache) st->pending[i]->view = st->views[i];
    for (const PlannedRead& r : reads) st->bytes_left[i] += r.n;
    for (const PlannedRead& r : reads) jobs.push_back({r, st.get(), static_cast<int>(i)});
    st->reads_left[i] = static_cast<int>(reads.size());
    reads.clear();
  }
  {
    FetchRecord rec;
    rec.experts = st->experts;
    rec.hit.resize(k, 0);
    for (size_t i = 0; i < k; ++i) rec.hit[i] = (s.cache && st->reads_left[i] == 0 && st->pins[i]) ? 1 : 0;
    std::lock_guard<std::mutex> lk(s.fetch_mu);
    if (s.last_fetch.size() < s.layers.size()) s.last_fetch.resize(s.layers.size());
    s.last_fetch[static_cast<size_t>(layer)] = std::move(rec);
  }
  st->outstanding = static_cast<int>(jobs.size());
  // Hits and zero-byte experts have no reads: ready at once.
  for (size_t i = 0; i < k; ++i) {
    if (st->reads_left[i] == 0) st->ready.push_back(static_cast<int>(i));
  }
  s.lanes->submit(jobs, opt.speculative ? ReadLanes::Priority::Speculative : ReadLanes::Priority::Demand);
  return Batch(std::move(st));
}

uint64_t ExpertStore::expert_bytes(int layer) const {
  impl_->check_layer(layer);
  return impl_->parts(layer).expert_bytes();
}

bool ExpertStore::is_cached(int layer, int expert) const {
  const Impl& s = *impl_;
  s.check_layer(layer);
  const uint64_t n_expert = s.parts(layer).n_expert();
  if (expert < 0 || static_cast<uint64_t>(expert) >= n_expert)
    throw Error("expert store: expert " + std::to_string(expert) + " out of range for layer " +
                std::to_string(layer) + " (" + std::to_string(n_expert) + " experts)");
  if (s.cfg.load_all) return true;
  return s.cache && s.cache->contains({layer, expert});
}

ExpertIoStats ExpertStore::stats() const {
  const Impl& s = *impl_;
  ExpertIoStats r;
  r.bytes_read = s.lane_stats.bytes_read.load();
  r.reads = s.lane_stats.reads.load();
  r.experts_read = s.experts_read.load();
  r.experts_hit = s.experts_hit.load();
  r.experts_unused = s.experts_unused.load();
  r.bytes_hit = s.bytes_hit.load();
  r.experts_transformed = s.experts_transformed.load();
  if (s.cache) {
    const ExpertCacheStats cs = s.cache->stats();
    r.cache_evictions = cs.evictions;
    r.cache_bytes_resident = cs.bytes_resident;
    r.cache_peak_bytes = cs.peak_bytes;
    r.cache_budget_bytes = s.cfg.cache_bytes;
  }
  r.io_seconds = static_cast<double>(s.lane_stats.io_ns.load()) * 1e-9;
  r.stall_seconds = static_cast<double>(s.stall_ns.load()) * 1e-9;
  return r;
}

bool ExpertStore::direct_io() const { return impl_->all_direct; }

ExpertStore::FetchRecord ExpertStore::last_fetch(int layer) const {
  impl_->check_layer(layer);
  std::lock_guard<std::mutex> lk(impl_->fetch_mu);
  if (static_cast<size_t>(layer) >= impl_->last_fetch.size()) return {};
  return impl_->last_fetch[static_cast<size_t>(layer)];
}

// ---- Batch ----

ExpertStore::Batch::Batch(std::unique_ptr<State> s) : state_(std::move(s)) {}
ExpertStore::Batch::Batch(Batch&&) noexcept = default;
ExpertStore::Batch& ExpertStore::Batch::operator=(Batch&&) noexcept = default;
ExpertStore::Batch::~Batch() = default;

size_t ExpertStore::Batch::size() const { return state_ ? state_->experts.size() : 0; }

int ExpertStore::Batch::next_ready() {
  if (!state_) return -1;
  State& st = *state_;
  std::unique_lock<std::mutex> lk(st.mu);
  auto can_return = [&st] {
    return st.error || st.n_taken < st.ready.size() || st.n_taken == st.experts.size();
  };
  if (!can_return()) {
    const auto t0 = Clock::now();
    st.cv.wait(lk, can_return);
    st.store->stall_ns += ns_since(t0);
  }
  if (st.error) std::rethrow_exception(st.error);
  if (st.n_taken == st.experts.size()) return -1;
  const int idx = st.ready[st.n_taken++];
  st.taken[static_cast<size_t>(idx)] = 1;
  return idx;
}

// Throws Error unless `index` is one next_ready() returned; st.mu held.
static void check_taken(const ExpertStore::Batch::State& st, int index, const char* what) {
  if (index < 0 || static_cast<size_t>(index) >= st.experts.size())
    throw Error(std::string("expert store: ") + what + "(" + std::to_string(index) + ") is not an index of this batch");
  if (!st.taken[static_cast<size_t>(index)])
    throw Error(std::string("expert store: ") + what + "(" + std::to_string(index) + ") before next_ready() returned it");
}

ExpertView ExpertStore::Batch::view(int index) const {
  if (!state_) throw Error("expert store: view(" + std::to_string(index) + ") on an empty batch");
  std::lock_guard<std::mutex> lk(state_->mu);
  check_taken(*state_, index, "view");
  return state_->views[static_cast<size_t>(index)];
}

void ExpertStore::Batch::settle(std::span<const uint8_t> needed) {
  if (!state_) return;
  State& st = *state_;
  if (needed.size() != st.experts.size())
    throw Error("expert store: settle() with " + std::to_string(needed.size()) + " flags for a batch of " +
                std::to_string(st.experts.size()) + " experts");
  if (!st.speculative) return;
  // Outside st.mu: dropped jobs are reported through read_done, which takes it.
  st.store->lanes->settle(&st, [&needed](int item) { return needed[static_cast<size_t>(item)] != 0; });
}

void ExpertStore::Batch::use(int index) {
  if (!state_) throw Error("expert store: use(" + std::to_string(index) + ") on an empty batch");
  State& st = *state_;
  std::unique_lock<std::mutex> lk(st.mu);
  check_taken(st, index, "use");
  const size_t i = static_cast<size_t>(index);
  if (st.used.empty() || st.used[i]) return;  // not speculative with a cache, or used already
  st.used[i] = 1;
  Impl& s = *st.store;
  const ExpertKey key{st.layer, st.experts[i]};
  if (st.pins[i]) {  // a peeked hit: now a demand hit (counted, most recently used)
    s.cache->acquire(key);
    s.experts_hit += 1;
    s.bytes_hit += st.hit_bytes[i];
  } else if (st.pending[i] && st.read_in_full[i]) {  // a demand miss, cached as a fetch's would be
    if (s.cfg.on_resident) {
      // Its re-lay, deferred from the read (see read_done). No lane touches
      // the buffer any more, and the consumer is this thread.
      CachedExpert& ce = *st.pending[i];
      if (!st.relay_outside_lock(lk, ce.view, index)) std::rethrow_exception(st.error);
      st.views[i] = ce.view;
    }
    s.cache->acquire(key);  // counts the miss (present only if another Batch cached it meanwhile)
    st.pins[i] = s.cache->insert(key, st.footprint[i], std::move(st.pending[i]));
  }
}

}  // namespace sluice::moe
