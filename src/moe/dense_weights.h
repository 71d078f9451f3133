// Dense weights: attention, norms, embeddings, router and shared-expert tensors,
// resident for the whole run under one DenseMode (--dense-weights mmap|warm|anon).
// The model layer sees only pointers to bytes; it never calls pread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "io/file.h"

namespace sluice::moe {

enum class DenseMode { Mmap, Warm, Anon };
DenseMode parse_dense_mode(const std::string& s);  // throws Error naming --dense-weights
const char* dense_mode_name(DenseMode m);

// Progress of loading the dense set: bytes made resident so far and the total.
// Calls are serialised (never concurrent) but may come from loader threads;
// `done` never decreases and the last call has done == total (also for an empty
// set or mmap mode, which loads nothing up front). Must not throw.
using LoadProgressFn = std::function<void(uint64_t done, uint64_t total)>;

struct DenseConfig {
  DenseMode mode = DenseMode::Anon;
  bool odirect = true;  // anon mode: read with O_DIRECT (buffered fallback where refused)
  LoadProgressFn on_progress;  // optional (e.g. a TTY progress bar)
  // Tests: wraps every file anon mode reads the dense set through (e.g. in an
  // io::FaultFile; see io::WrapFile). Mapped modes read no file. Empty: none.
  io::WrapFile wrap_file;
};

// Holds every non-expert tensor of a model. Immutable after construction
// (except what its owner rewrites through writable() before using the
// tensor); data() may be called from any thread.
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
  // Anon mode: the same bytes, writable: the private copy the model may
  // transform in place once, before its first use (the packed layout). Null
  // in the mapped modes (read-only file mappings stay as the file has them)
  // and for empty tensors. Error if t was not loaded.
  uint8_t* writable(const gguf::TensorInfo& t);
  uint64_t bytes() const;                 // total dense bytes
  double resident_fraction() const;       // mincore over the dense set (anon: over its buffers)
  bool used_buffered_fallback() const;    // anon mode where O_DIRECT was refused
  DenseMode mode() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::moe
