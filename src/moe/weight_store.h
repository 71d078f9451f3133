// Where model weights live in memory, and how they get there.
//
// DenseWeights: attention, norms, embeddings, router and shared-expert tensors,
// resident for the whole run under one DenseMode. ExpertStore: routed experts,
// never mapped, read on demand with pread into reusable slots (cache off) or
// kept resident (--load-all, a debug mode). The model layer sees only
// pointers to bytes; it never calls pread. The store never does math.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace sluice::moe {

enum class DenseMode { Mmap, Warm, Anon };
DenseMode parse_dense_mode(const std::string& s);  // throws Error naming --dense-weights
const char* dense_mode_name(DenseMode m);

struct DenseConfig {
  DenseMode mode = DenseMode::Anon;
  bool odirect = true;  // anon mode: read with O_DIRECT (buffered fallback where refused)
};

// Holds every non-expert tensor of a model. Immutable after construction;
// data() may be called from any thread.
class DenseWeights {
 public:
  // `is_expert(t)` selects the tensors NOT to load (the *_exps tensors).
  DenseWeights(const gguf::GgufModel& model, const DenseConfig& cfg,
               const std::function<bool(const gguf::TensorInfo&)>& is_expert);
  ~DenseWeights();
  DenseWeights(const DenseWeights&) = delete;
  DenseWeights& operator=(const DenseWeights&) = delete;

  // Pointer to the tensor's bytes (t.bytes long). Error if t was not loaded.
  const void* data(const gguf::TensorInfo& t) const;
  uint64_t bytes() const;                 // total dense bytes
  double resident_fraction() const;       // mincore over the dense set (anon: over its buffers)
  bool used_buffered_fallback() const;    // anon mode where O_DIRECT was refused
  DenseMode mode() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The three stacked expert tensors of one MoE layer ({n_in, n_out, n_expert}).
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
};

struct ExpertStoreConfig {
  bool odirect = true;   // aligned O_DIRECT reads (buffered fallback where refused)
  int io_threads = 4;    // read lanes
  bool load_all = false; // keep every expert resident (debug / small models)
  // Tests: wraps every file the store opens (e.g. in an io::FaultFile). Empty: none.
  std::function<std::shared_ptr<const io::File>(std::shared_ptr<const io::File>)> wrap_file;
};

struct ExpertIoStats {
  uint64_t bytes_read = 0;
  uint64_t reads = 0;
  uint64_t experts_read = 0;
  double io_seconds = 0;     // summed over lanes: time inside pread
  double stall_seconds = 0;  // time the compute thread waited in next_ready()
};

// Thread-safety: fetch(), expert_bytes(), stats() and direct_io() may be called
// from any thread. Reads run on the store's own `io_threads` lanes. A Batch is
// meant for one consumer thread (its calls are internally locked, so misuse is
// still memory-safe). Errors: I/O failures surface from Batch::next_ready() as
// sluice::Error naming the file, offset, expert and layer; bad arguments to
// fetch() throw at once.
class ExpertStore {
 public:
  // layers[l] has null pointers for layers without experts.
  ExpertStore(const gguf::GgufModel& model, std::vector<LayerExperts> layers,
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
    struct State;
   private:
    friend class ExpertStore;
    explicit Batch(std::unique_ptr<State> s);
    std::unique_ptr<State> state_;
  };

  // Starts reading `experts` (distinct ids) of `layer` on the read lanes.
  Batch fetch(int layer, std::span<const int> experts);

  uint64_t expert_bytes(int layer) const;  // gate+up+down bytes of one expert
  // Whether fetching (layer, expert) now would be served without a read (the
  // routing trim --drop-cold-experts asks this). Cache off: false for every
  // expert; load_all: true. Throws Error for a bad layer or expert id.
  bool is_cached(int layer, int expert) const;
  ExpertIoStats stats() const;
  bool direct_io() const;  // true when O_DIRECT is in use for every file (false after a fallback)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::moe
