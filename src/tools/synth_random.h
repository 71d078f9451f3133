// Seeded random numbers and directly generated quantized blocks for `synth`.
//
// Determinism contract: every row of every tensor draws from its own generator,
// seeded from (model seed, tensor name, row index) only, so the bytes written do
// not depend on how rows are split across threads. The RNG is xoshiro256**
// seeded through splitmix64; normals use Box-Muller in float.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

#include "util/ggml_type.h"

namespace sluice::tools {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Combines seeds so that nearby inputs give unrelated outputs.
inline uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t s = a ^ (b * 0xd1b54a32d192ed03ull);
  splitmix64(s);
  return splitmix64(s);
}

// FNV-1a: a stable (platform-independent) hash of a tensor name.
inline uint64_t hash_name(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& w : s_) w = splitmix64(seed);
  }
  uint64_t next() {  // xoshiro256**
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 24 random bits.
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
  // Uniform integer in [lo, hi] (hi - lo small; the modulo bias is irrelevant here).
  int uniform_int(int lo, int hi) { return lo + static_cast<int>(next() % static_cast<uint64_t>(hi - lo + 1)); }
  // Standard normal (Box-Muller; caches the second value).
  float normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const float u1 = (static_cast<float>(next() >> 40) + 1.0f) * (1.0f / 16777217.0f);  // (0, 1]
    const float u2 = uniform();
    const float r = std::sqrt(-2.0f * std::log(u1));
    const float a = 6.28318530718f * u2;
    spare_ = r * std::sin(a);
    has_spare_ = true;
    return r * std::cos(a);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  float spare_ = 0;
  bool has_spare_ = false;
};

// Types for which random quantized blocks can be generated directly.
bool direct_block_supported(GgmlType t);

// Fills one row of n values (a multiple of the block size) of type t with random
// codes and scales such that the dequantized values have mean ~0 and standard
// deviation ~`std` (see synth_blocks.cpp for how each format is handled).
// Precondition: direct_block_supported(t).
void generate_direct_row(GgmlType t, Rng& rng, float std, void* dst, int64_t n);

}  // namespace sluice::tools
