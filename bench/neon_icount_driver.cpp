// Driver of bench/neon_icount.sh (not part of the CMake build): calls sluice's
// NEON K-quant dots (one build, argv[2]: plain | sdot) and ggml's
// (whatever build of ggml's arch/arm/quants.c it was linked with) once each
// on a row of argv[1] 256-value blocks, each call between two calls of
// icount_mark(), then sluice's Q4_K and Q6_K vec_dot_cols on four rows, so that an instruction trace of the run (qemu -singlestep
// -d exec) can be cut into one count per call. Prints the results, so the
// calls cannot be dropped and sluice's and ggml's values can be eyeballed.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/arm/kquant_neon.h"
#include "kernels/blocks_kquant.h"
#include "util/fp16.h"

extern "C" {
// ggml-cpu/arch/arm/quants.c, llama.cpp b10573.
void ggml_vec_dot_q4_K_q8_K(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                            int nrc);
void ggml_vec_dot_q5_K_q8_K(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                            int nrc);
void ggml_vec_dot_q6_K_q8_K(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                            int nrc);
// quants.c references these from functions the driver never calls.
float ggml_table_f32_ue4m3[256];
void quantize_row_q8_K_ref(const float*, void*, long) { std::abort(); }

__attribute__((noinline)) void icount_mark(int id) { asm volatile("" : : "r"(id) : "memory"); }
}

namespace {

using namespace sluice;
using namespace sluice::kernels;

// xorshift64: cheap, so the traced run spends few instructions making data.
struct Rng {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  uint64_t operator()() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
};

// Random blocks of `bytes` bytes with finite fp16 scales at the given offsets.
std::vector<uint8_t> weights(int blocks, size_t bytes, std::initializer_list<size_t> half_offsets, Rng& rng) {
  std::vector<uint8_t> w(blocks * bytes + 8);
  for (size_t i = 0; i + 8 <= w.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(&w[i], &v, 8);
  }
  for (int i = 0; i < blocks; ++i)
    for (size_t off : half_offsets) {
      const uint16_t h = fp32_to_fp16(0.01f + 0.001f * static_cast<float>(rng() % 100));
      std::memcpy(&w[i * bytes + off], &h, 2);
    }
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BLOCKS plain|sdot\n", argv[0]);
    return 2;
  }
  const int blocks = std::atoi(argv[1]);
  const std::string tier = argv[2];
  const int n = blocks * kQK_K;
  Rng rng;
  std::vector<BlockQ8K> act(blocks);
  for (auto& b : act) {
    b.d = 0.01f;
    for (int j = 0; j < kQK_K; ++j) b.qs[j] = static_cast<int8_t>(static_cast<int>(rng() & 0xff) % 255 - 127);
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += b.qs[16 * g + l];
      b.bsums[g] = static_cast<int16_t>(s);
    }
  }
  const auto q4 = weights(blocks, sizeof(BlockQ4K), {0, 2}, rng);
  const auto q5 = weights(blocks, sizeof(BlockQ5K), {0, 2}, rng);
  const auto q6 = weights(blocks, sizeof(BlockQ6K), {208}, rng);

  KernelTable table{};
  fill_kquant_neon_tier(table, tier == "sdot" ? NeonKquantTier::Dotprod : NeonKquantTier::Plain);
  auto ours = [&](GgmlType t) { return table[static_cast<uint32_t>(t)].vec_dot; };
  float r[6];
  icount_mark(0);
  r[0] = ours(GgmlType::Q4_K)(n, q4.data(), act.data());
  icount_mark(1);
  ggml_vec_dot_q4_K_q8_K(n, &r[1], 0, q4.data(), 0, act.data(), 0, 1);
  icount_mark(2);
  r[2] = ours(GgmlType::Q5_K)(n, q5.data(), act.data());
  icount_mark(3);
  ggml_vec_dot_q5_K_q8_K(n, &r[3], 0, q5.data(), 0, act.data(), 0, 1);
  icount_mark(4);
  r[4] = ours(GgmlType::Q6_K)(n, q6.data(), act.data());
  icount_mark(5);
  ggml_vec_dot_q6_K_q8_K(n, &r[5], 0, q6.data(), 0, act.data(), 0, 1);
  icount_mark(6);
  // Prefill: four activation rows per call (vec_dot_cols), here four times the same row.
  const void* cols[4] = {act.data(), act.data(), act.data(), act.data()};
  float c4[4], c6[4];
  table[static_cast<uint32_t>(GgmlType::Q4_K)].vec_dot_cols(n, q4.data(), cols, 4, c4);
  icount_mark(7);
  table[static_cast<uint32_t>(GgmlType::Q6_K)].vec_dot_cols(n, q6.data(), cols, 4, c6);
  icount_mark(8);
  std::printf("q4_k %g %g q5_k %g %g q6_k %g %g cols q4_k %g q6_k %g\n", r[0], r[1], r[2], r[3], r[4], r[5], c4[3],
              c6[3]);
  return 0;
}
