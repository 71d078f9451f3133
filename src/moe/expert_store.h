// Routed experts: never mapped, read on demand with pread (lanes or io_uring)
// into reusable slots (cache off) or an LRU cache, or kept resident
// (--load-all, a debug mode). The model layer sees only pointers to bytes; it
// never calls pread. The store never does math.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/expert_layout.h"
#include "gguf/gguf.h"
#include "io/file.h"
#include "io/uring_queue.h"

namespace sluice::moe {

// The three stacked expert tensors of one MoE layer ({n_in, n_out, n_expert}).
// (Stacked files only; the general form, for either layout, is
// gguf::LayerExpertParts from gguf::layer_expert_parts().)
struct LayerExperts {
  const gguf::TensorInfo* gate = nullptr;
  const gguf::TensorInfo* up = nullptr;
  const gguf::TensorInfo* down = nullptr;
};

// Bytes of one expert: valid while the Batch (or store, for load_all) lives.
struct ExpertView {
  const void* gate = nullptr;
  const void* up = nullptr;
  const void* down = nullptr;
  // ExpertStoreConfig::on_resident was applied to these bytes (e.g. the
  // model's packed layout); false: the file's bytes as they are.
  bool packed = false;
};

// Re-lays one expert's bytes in place as they become resident (supplied by the
// model: the store never knows what the bytes mean). gate/up/down point at
// each part's own bytes (exactly the part's byte range; alignment slack
// around them is not the transform's). Called on read lanes and loader threads,
// concurrently for different experts, before any reader can see the expert:
// must be thread-safe. If it throws, the expert is never cached and the error
// surfaces like a read error (Batch::next_ready, or the store's constructor).
using ExpertTransform = std::function<void(int layer, void* gate, void* up, void* down)>;

struct ExpertStoreConfig {
  bool odirect = true;   // aligned O_DIRECT reads (buffered fallback where refused)
  int io_threads = 4;    // read lanes (Pread engine)
  io::IoEngine io_engine = io::IoEngine::Pread;  // --io-engine (moe/read_lanes.h)
  int io_depth = 8;      // Uring engine: reads in flight
  bool load_all = false; // keep every expert resident (debug / small models)
  // Expert cache budget in bytes (0 = cache off: every fetch reads). With a
  // budget, fetched experts stay resident in an LRU of whole experts until
  // evicted (their buffers then go to a pool of at most min(budget / 8, 256 MiB)
  // that later misses reuse, else are unmapped); hits are ready at once. Accounted in
  // allocated bytes (4 KiB-aligned covers), so memory follows the budget; an
  // expert that cannot be cached (budget too small, everything pinned by live
  // Batches) is read into a private buffer freed with its Batch. The caller
  // validates the budget against the floor (moe/cache_budget.h).
  // Ignored with load_all.
  uint64_t cache_bytes = 0;
  // Optional: applied once to every expert that stays resident, i.e. as it
  // enters the cache (before the cache or the Batch serves it; also when the
  // cache cannot keep it and the Batch's private buffer serves it) and to
  // every expert of --load-all at load. Cache off (streaming: bytes used
  // once) applies it only to the experts a fetch asks for
  // (FetchOptions::transform_streamed). ExpertView::packed says which bytes it
  // was applied to.
  ExpertTransform on_resident;
  // Tests: wraps every file the store opens (e.g. in an io::FaultFile). Empty: none.
  io::WrapFile wrap_file;
};

// Per-fetch choices (ExpertStore::fetch).
struct FetchOptions {
  // Cache off: one flag per requested expert (fetch's order), or empty. A
  // nonzero flag has the read lane apply ExpertStoreConfig::on_resident to that
  // streamed expert after its read, as to a resident one, so its view comes
  // back packed. Worth it for an expert several positions use (a prompt
  // micro-batch): the re-lay then pays for itself in one multi-column matmul.
  // Ignored with a cache or load_all (their experts are transformed anyway)
  // and when on_resident is null.
  std::span<const uint8_t> transform_streamed;
  // A prediction (the next layer's prefetch): until the consumer calls
  // Batch::use(i), expert i leaves the cache as it was. A hit is pinned but
  // neither counted nor made recently used; a miss is read into its own
  // buffer but neither re-laid nor inserted, so a wrong guess evicts nothing
  // and costs no CPU. use()
  // makes it an ordinary demand access: the hit counts and becomes most
  // recently used, the read one enters the cache. Experts never used are
  // dropped with the Batch (read buffers back to the pool) and counted in
  // ExpertIoStats::experts_unused. The cache part has no effect without a
  // cache; with or without one, the reads are queued behind every demand
  // read and only a share of the lanes runs them (moe/read_lanes.h) until
  // Batch::settle().
  bool speculative = false;
};

struct ExpertIoStats {
  uint64_t bytes_read = 0;
  uint64_t reads = 0;
  uint64_t experts_read = 0;  // experts read from the file
  uint64_t experts_unused = 0;  // of experts_read: speculative reads never used (FetchOptions::speculative)
  uint64_t experts_hit = 0;   // experts served from the cache (no read); speculative ones once used
  uint64_t bytes_hit = 0;     // expert bytes (gate+up+down) those hits saved
  uint64_t experts_transformed = 0;  // experts ExpertStoreConfig::on_resident was applied to (resident or streamed)
  uint64_t cache_evictions = 0;
  uint64_t cache_bytes_resident = 0;  // allocated bytes held by the cache now
  uint64_t cache_peak_bytes = 0;
  uint64_t cache_budget_bytes = 0;    // the cache's budget as resolved at load (0: cache off / load_all)
  double io_seconds = 0;     // summed over lanes: time inside pread
  double stall_seconds = 0;  // time the compute thread waited in next_ready()
};

// Thread-safety: fetch(), expert_bytes(), stats() and direct_io() may be called
// from any thread. Reads run on the store's own `io_threads` lanes. A Batch is
// meant for one consumer thread (its calls are internally locked, so misuse is
// still memory-safe). With a cache, a Batch pins the cached experts it serves
// until it is destroyed, so they cannot be evicted under it. Errors: I/O
// failures surface from Batch::next_ready() as sluice::Error naming the file,
// offset, expert and layer; bad arguments to fetch() throw at once.
class ExpertStore {
 public:
  // layers[l] describes layer l's experts in either file layout (stacked or
  // expert-major); !present() for layers without experts. An expert's parts
  // whose 4 KiB-aligned covers touch are read as one extent (one read, or
  // several of at most 1 MiB for a bigger expert).
  ExpertStore(const gguf::GgufModel& model, std::vector<gguf::LayerExpertParts> layers,
              const ExpertStoreConfig& cfg);
  // Stacked files: layers[l] has null pointers for layers without experts.
  ExpertStore(const gguf::GgufModel& model, const std::vector<LayerExperts>& layers,
              const ExpertStoreConfig& cfg);
  ~ExpertStore();
  ExpertStore(const ExpertStore&) = delete;
  ExpertStore& operator=(const ExpertStore&) = delete;

  // The experts requested from one layer, arriving as their reads complete.
  // Move-only; its destructor waits for outstanding reads and releases the slots.
  // Each alive Batch holds its own slots (taken from the store's reusable pool),
  // so a Batch for the next layer may be fetched while this one is consumed.
  // Every Batch must be destroyed before its store.
  class Batch {
   public:
    Batch(Batch&&) noexcept;
    Batch& operator=(Batch&&) noexcept;
    ~Batch();
    size_t size() const;
    // Blocks until a not-yet-taken expert is complete; returns its index into
    // the requested list, or -1 once all were taken. Throws Error on I/O failure.
    int next_ready();
    ExpertView view(int index) const;  // index must have been returned by next_ready()
    // The consumer uses expert `index` (returned by next_ready()): for a
    // speculative fetch, counts it and lets it into the cache (see
    // FetchOptions::speculative), applying ExpertStoreConfig::on_resident to
    // a read one first, on this thread; call view() after it. Otherwise, and
    // when called again, nothing. Throws Error when the transform fails (the
    // expert is then never cached).
    void use(int index);
    // A speculative batch's consumer knows what it needs (needed[i] != 0 for
    // expert i): their reads not yet started become demand reads; the
    // others' are dropped, so next_ready() returns those experts without
    // their bytes (their views must not be read). Error unless needed has
    // size() flags. No effect on other batches.
    void settle(std::span<const uint8_t> needed);
    struct State;
   private:
    friend class ExpertStore;
    explicit Batch(std::unique_ptr<State> s);
    std::unique_ptr<State> state_;
  };

  // Starts reading `experts` (distinct ids) of `layer` on the read lanes.
  // Error if opt.transform_streamed is neither empty nor experts.size() long.
  Batch fetch(int layer, std::span<const int> experts, const FetchOptions& opt = {});

  uint64_t expert_bytes(int layer) const;  // gate+up+down bytes of one expert
  // Whether fetching (layer, expert) now would be served without a read (the
  // routing trim --drop-cold-experts asks this). Cache off: false for every
  // expert; load_all: true. Throws Error for a bad layer or expert id.
  bool is_cached(int layer, int expert) const;
  ExpertIoStats stats() const;
  bool direct_io() const;  // true when O_DIRECT is in use for every file (false after a fallback)

  // What the most recent fetch() of `layer` asked for and what the cache did
  // (route traces). hit[i] != 0: experts[i] was served from the cache without
  // a read; 0: it was read (cache off, a miss, or load_all: never a hit).
  // Empty before the first fetch of the layer. Thread-safe (copied under a lock).
  struct FetchRecord {
    std::vector<int> experts;
    std::vector<uint8_t> hit;
  };
  FetchRecord last_fetch(int layer) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::moe
