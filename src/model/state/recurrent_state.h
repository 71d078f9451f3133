// One recurrent layer's state (e.g. a gated DeltaNet mixer): the last K-1
// inputs of its causal convolution and one S x S matrix per head. Unlike KV
// rows it is a single value that every token overwrites, so it cannot be
// rolled back by position: ModelState keeps copies (checkpoints) instead.
#pragma once

#include <cstdint>
#include <vector>

#include "model/state/state_spec.h"

namespace sluice::model {

class RecurrentState {
 public:
  // Allocates spec.floats() floats, all zero (the state at sequence start).
  explicit RecurrentState(const RecurrentSpec& spec);

  const RecurrentSpec& spec() const { return spec_; }
  // [conv_taps][conv_channels]: the convolution's past inputs, oldest tap first.
  float* conv() { return values_.data(); }
  const float* conv() const { return values_.data(); }
  // [n_heads][head_size][head_size], after conv() in memory.
  float* matrices() { return values_.data() + spec_.conv_floats(); }
  const float* matrices() const { return values_.data() + spec_.conv_floats(); }
  // Back to the state at sequence start (all zero).
  void reset();
  uint64_t bytes() const { return values_.size() * sizeof(float); }

  // Checkpoints: save() copies every value into `out` (resized, so a reused
  // buffer costs no allocation); restore() puts such a copy back (Error when
  // its size is not this state's).
  void save(std::vector<float>& out) const;
  void restore(const std::vector<float>& saved);

 private:
  RecurrentSpec spec_;
  std::vector<float> values_;
};

}  // namespace sluice::model
