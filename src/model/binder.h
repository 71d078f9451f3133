// Tensor binding for the transformer (model/transformer.h): tensor lookup by
// name with shape and type checks, and the claims that let the transformer
// report a tensor no block of the architecture takes.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "gguf/expert_layout.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "model/matmul.h"
#include "model/packed_layout.h"
#include "model/thread_pool.h"
#include "moe/dense_weights.h"
#include "moe/expert_store.h"
#include "util/error.h"

namespace sluice::model {

// "{a, b, c}" (for messages).
std::string shape_str(const std::vector<uint64_t>& ne);
// True if `ne` equals `want`, ignoring trailing 1s (GGUF writers differ there).
bool same_shape(std::vector<uint64_t> ne, std::vector<uint64_t> want);

// Looks tensors up by name, checks shape and type, returns usable views, and
// remembers every tensor it handed out (so unclaimed ones can be reported).
// With `pack` (anon dense set, --resident-layout packed), matmul weights are
// re-laid in place into the packed layout as they are bound, once per matrix,
// except tensors read by row (bound through rows(), which must come first).
class Binder {
 public:
  Binder(const gguf::GgufModel& g, moe::DenseWeights& dw, bool pack, ThreadPool* pool)
      : g_(g), dw_(dw), pack_(pack), pool_(pool) {}
  uint64_t packed_bytes() const { return packed_bytes_; }

  // A tensor read by row (embedding lookups): checked like shaped() and kept
  // plain even where it is also bound as a matrix (a tied lm head).
  const gguf::TensorInfo& rows(const std::string& name, std::vector<uint64_t> want) {
    if (packed_.count(name)) throw Error("internal: tensor " + name + " is read by row but was packed");
    row_read_.insert(name);
    return shaped(name, std::move(want));
  }

  const gguf::TensorInfo* find(const std::string& name) const { return g_.find(name); }
  bool claimed(const std::string& name) const { return claimed_.count(name) != 0; }

  const gguf::TensorInfo& shaped(const std::string& name, std::vector<uint64_t> want) {
    const gguf::TensorInfo& t = g_.require(name);
    if (!same_shape(t.ne, want))
      throw Error("tensor " + name + " has shape " + shape_str(t.ne) + ", expected " + shape_str(want));
    claimed_.insert(name);
    return t;
  }

  WeightMatrix matrix(const std::string& name, uint64_t n_in, uint64_t n_out) {
    const gguf::TensorInfo& t = shaped(name, {n_in, n_out});
    return resident(t, make_weight(dw_.data(t), t.type, static_cast<int64_t>(n_in), static_cast<int64_t>(n_out), name));
  }

  // An F32 tensor of shape `want` (norm weights, biases, sinks).
  const float* f32(const std::string& name, std::vector<uint64_t> want) {
    const gguf::TensorInfo& t = shaped(name, std::move(want));
    if (t.type != GgmlType::F32)
      throw Error("unsupported tensor type " + std::string(ggml_type_name(t.type)) + " in tensor " + name +
                  " (norms, biases and sinks must be F32)");
    return static_cast<const float*>(dw_.data(t));
  }
  const float* vector(const std::string& name, uint64_t n) { return f32(name, {n}); }

  // An optional input: bound when `need` is Required (missing: Error) or
  // Optional and present; null otherwise.
  const float* vector_if(Need need, const std::string& name, std::vector<uint64_t> want) {
    if (need == Need::Absent || (need == Need::Optional && !find(name))) return nullptr;
    return f32(name, std::move(want));
  }

  // One part of a layer's experts (either file layout): the per-expert matrix
  // template (type and shape, no data; the ExpertStore supplies the bytes).
  WeightMatrix expert(const gguf::LayerExpertParts& lp, size_t part, uint64_t n_in, uint64_t n_out) const {
    const gguf::ExpertPartInfo& p = lp.part[part];
    if (!same_shape(p.ne, {n_in, n_out}))
      throw Error("tensor " + p.tensor + " has one-expert shape " + shape_str(p.ne) + ", expected " +
                  shape_str({n_in, n_out}));
    return make_weight(nullptr, p.type, static_cast<int64_t>(n_in), static_cast<int64_t>(n_out), p.tensor);
  }

 private:
  // w (a matmul view into tensor t) in the layout it will be read in: packed
  // in place the first time this matrix (w.name) is bound when packing is on,
  // t is not read by row, and its bytes are writable (anon); else as it is.
  WeightMatrix resident(const gguf::TensorInfo& t, WeightMatrix w) {
    if (!pack_ || row_read_.count(t.name)) return w;
    uint8_t* base = dw_.writable(t);
    if (!base) return w;
    if (packed_.insert(w.name).second) {
      const size_t off = static_cast<size_t>(w.data - static_cast<const uint8_t*>(dw_.data(t)));
      packed_bytes_ += pack_in_place(base + off, w, pool_);
    }
    return as_packed(std::move(w));
  }

  const gguf::GgufModel& g_;
  moe::DenseWeights& dw_;
  const bool pack_;
  ThreadPool* const pool_;
  std::unordered_set<std::string> claimed_;
  std::unordered_set<std::string> row_read_;  // bound through rows(): never packed
  std::unordered_set<std::string> packed_;    // matrix names (per-head slices apart) re-laid
  uint64_t packed_bytes_ = 0;

 public:
  // Block g's matrix (rows [g n_out, (g+1) n_out)) of a 2-D tensor
  // {n_in, n_out * n_blocks}, which is laid out exactly as {n_in, n_out, n_blocks}.
  std::vector<WeightMatrix> row_blocks(const std::string& name, uint64_t n_in, uint64_t n_out, uint64_t n_blocks) {
    const gguf::TensorInfo& t = shaped(name, {n_in, n_out * n_blocks});
    const uint8_t* base = static_cast<const uint8_t*>(dw_.data(t));
    const uint64_t slice = t.bytes / n_blocks;
    std::vector<WeightMatrix> out;
    for (uint64_t g = 0; g < n_blocks; ++g)
      out.push_back(resident(t, make_weight(base + g * slice, t.type, static_cast<int64_t>(n_in),
                                            static_cast<int64_t>(n_out), name + " (group " + std::to_string(g) + ")")));
    return out;
  }
  // Head h's matrix of a 3-D per-head tensor {n_in, n_out, n_head}.
  std::vector<WeightMatrix> per_head(const std::string& name, uint64_t n_in, uint64_t n_out, uint64_t n_head) {
    const gguf::TensorInfo& t = shaped(name, {n_in, n_out, n_head});
    const uint8_t* base = static_cast<const uint8_t*>(dw_.data(t));
    const uint64_t slice = t.bytes / n_head;
    std::vector<WeightMatrix> out;
    for (uint64_t h = 0; h < n_head; ++h)
      out.push_back(resident(t, make_weight(base + h * slice, t.type, static_cast<int64_t>(n_in),
                                            static_cast<int64_t>(n_out), name + " (head " + std::to_string(h) + ")")));
    return out;
  }
};

}  // namespace sluice::model
