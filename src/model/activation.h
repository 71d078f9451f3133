// The scalar activations the mixers and routers apply element by element,
// written once so every caller rounds them alike (the invariants are
// bit-identity).
#pragma once

#include <cmath>

namespace sluice::model {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// x sigmoid(x), computed as x / (1 + e^-x) (ggml's CPU silu).
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace sluice::model
