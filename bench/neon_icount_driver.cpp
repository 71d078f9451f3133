// Driver of bench/neon_icount.sh (not part of the CMake build): calls sluice's
// NEON K-quant and MXFP4 dots (one build, argv[2]: plain | sdot | i8mm, the
// last the sdot build) and ggml's
// (whatever build of ggml's arch/arm/quants.c it was linked with) once each
// on a row of argv[1] 256-value blocks, each call after a call of
// icount_mark(), then sluice's Q4_K and Q6_K vec_dot_cols on four rows, and
// for i8mm sluice's Q4_K i8mm vec_dot, prepare_tile of 16 positions and tile GEMM
// of 16 rows by them, then ggml's two-row-two-column (nrc 2) Q4_K and Q6_K dots,
// so that an instruction trace of the run (qemu -singlestep
// -d exec) can be cut into one count per call. Prints the results, so the
// calls cannot be dropped and sluice's and ggml's values can be eyeballed.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/arm/kquant_neon.h"
#include "kernels/arm/legacy_neon.h"
#include "kernels/blocks_legacy.h"
#include "kernels/blocks_kquant.h"
#include "kernels/kernel_table.h"
#include "util/fp16.h"

extern "C" {
// ggml-cpu/arch/arm/quants.c, llama.cpp b10573.
#define GGML_DOT(name) \
  void name(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by, int nrc)
GGML_DOT(ggml_vec_dot_q2_K_q8_K);
GGML_DOT(ggml_vec_dot_q3_K_q8_K);
GGML_DOT(ggml_vec_dot_q4_K_q8_K);
GGML_DOT(ggml_vec_dot_q5_K_q8_K);
GGML_DOT(ggml_vec_dot_q6_K_q8_K);
GGML_DOT(ggml_vec_dot_iq4_xs_q8_K);
GGML_DOT(ggml_vec_dot_mxfp4_q8_0);
#undef GGML_DOT
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
    std::fprintf(stderr, "usage: %s BLOCKS plain|sdot|i8mm\n", argv[0]);
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
  // MXFP4 dots with Q8_0 activations: 8 blocks of 32 per 256 values.
  std::vector<BlockQ8_0> act8(static_cast<size_t>(blocks) * 8);
  for (size_t i = 0; i < act8.size(); ++i) {
    act8[i].d = fp32_to_fp16(0.01f);
    std::memcpy(act8[i].qs, act[i / 8].qs + 32 * (i % 8), 32);
  }
  struct Format {
    const char* name;
    GgmlType type;
    std::vector<uint8_t> w;
    void (*ggml)(int, float*, size_t, const void*, size_t, const void*, size_t, int);
  };
  // Order = the table's rows (bench/neon_icount.sh: kFormats).
  std::vector<Format> formats;
  formats.push_back({"Q4_K", GgmlType::Q4_K, weights(blocks, sizeof(BlockQ4K), {0, 2}, rng), ggml_vec_dot_q4_K_q8_K});
  formats.push_back({"Q5_K", GgmlType::Q5_K, weights(blocks, sizeof(BlockQ5K), {0, 2}, rng), ggml_vec_dot_q5_K_q8_K});
  formats.push_back({"Q6_K", GgmlType::Q6_K, weights(blocks, sizeof(BlockQ6K), {208}, rng), ggml_vec_dot_q6_K_q8_K});
  formats.push_back({"Q2_K", GgmlType::Q2_K, weights(blocks, sizeof(BlockQ2K), {80, 82}, rng), ggml_vec_dot_q2_K_q8_K});
  formats.push_back({"Q3_K", GgmlType::Q3_K, weights(blocks, sizeof(BlockQ3K), {108}, rng), ggml_vec_dot_q3_K_q8_K});
  formats.push_back(
      {"IQ4_XS", GgmlType::IQ4_XS, weights(blocks, sizeof(BlockIq4Xs), {0}, rng), ggml_vec_dot_iq4_xs_q8_K});
  // MXFP4: 17-byte blocks, the scale an E8M0 byte (kept small so values stay finite).
  std::vector<uint8_t> mx = weights(blocks * 8, sizeof(BlockMxfp4), {}, rng);
  for (int i = 0; i < blocks * 8; ++i) mx[i * sizeof(BlockMxfp4)] = static_cast<uint8_t>(120 + rng() % 8);
  formats.push_back({"MXFP4", GgmlType::MXFP4, mx, ggml_vec_dot_mxfp4_q8_0});

  KernelTable table{};
  const NeonTier t = tier == "plain" ? NeonTier::Plain : NeonTier::Dotprod;
  fill_kquant_neon_tier(table, t);
  fill_legacy_neon_tier(table, t);
  // Marks: before each format's sluice call, before its ggml call, then two
  // vec_dot_cols calls of four rows (Q4_K, Q6_K) and a last mark.
  int mark = 0;
  std::vector<float> ours(formats.size()), theirs(formats.size());
  for (size_t i = 0; i < formats.size(); ++i) {
    const Format& f = formats[i];
    const void* a = f.type == GgmlType::MXFP4 ? static_cast<const void*>(act8.data()) : act.data();
    icount_mark(mark++);
    ours[i] = table[static_cast<uint32_t>(f.type)].vec_dot(n, f.w.data(), a);
    icount_mark(mark++);
    f.ggml(n, &theirs[i], 0, f.w.data(), 0, a, 0, 1);
  }
  // Prefill: four activation rows per call (vec_dot_cols), here four times the same row.
  const void* cols[4] = {act.data(), act.data(), act.data(), act.data()};
  float c4[4], c6[4];
  icount_mark(mark++);
  table[static_cast<uint32_t>(GgmlType::Q4_K)].vec_dot_cols(n, formats[0].w.data(), cols, 4, c4);
  icount_mark(mark++);
  table[static_cast<uint32_t>(GgmlType::Q6_K)].vec_dot_cols(n, formats[2].w.data(), cols, 4, c6);
  icount_mark(mark++);
  for (size_t i = 0; i < formats.size(); ++i) std::printf("%s %g %g\n", formats[i].name, ours[i], theirs[i]);
  std::printf("cols q4_k %g q6_k %g\n", c4[3], c6[3]);
  if (tier != "i8mm") return 0;
  // i8mm: one Q4_K vec_dot in the run-sum rounding; prepare_tile of kTileCols
  // positions; the tile GEMM of kTileRows rows by them; ggml's 2x2 Q4_K and
  // Q6_K calls (two rows, two activation columns: four outputs).
  KernelTable mm{};
  fill_i8mm_q4k(mm);
  const TypeKernels& k = mm[static_cast<uint32_t>(GgmlType::Q4_K)];
  const size_t row4 = sizeof(BlockQ4K) * blocks, row6 = sizeof(BlockQ6K) * blocks;
  const std::vector<uint8_t> w4 = weights(blocks * kTileRows, sizeof(BlockQ4K), {0, 2}, rng);
  const std::vector<uint8_t> w6 = weights(blocks * 2, sizeof(BlockQ6K), {208}, rng);
  std::vector<const void*> tile_act(kTileCols, act.data());
  std::vector<TileLine> prepared(static_cast<size_t>(blocks) * (kTilePreparedBlockBytes / sizeof(TileLine)));
  std::vector<float> tile_out(kTileRows * kTileCols);
  std::vector<BlockQ8K> act2(act);
  act2.insert(act2.end(), act.begin(), act.end());  // two activation rows back to back
  float one = 0, g4[4] = {}, g6[4] = {};
  icount_mark(mark++);
  one = k.vec_dot(n, w4.data(), act.data());
  icount_mark(mark++);
  k.prepare_tile(n, tile_act.data(), kTileCols, prepared.data());
  icount_mark(mark++);
  k.gemm_tile({.n = n, .w = w4.data(), .row_bytes = row4, .n_rows = kTileRows, .prepared = prepared.data(),
               .n_act = kTileCols, .out = tile_out.data(), .out_stride = kTileRows});
  icount_mark(mark++);
  ggml_vec_dot_q4_K_q8_K(n, g4, 2, w4.data(), row4, act2.data(), sizeof(BlockQ8K) * blocks, 2);
  icount_mark(mark++);
  ggml_vec_dot_q6_K_q8_K(n, g6, 2, w6.data(), row6, act2.data(), sizeof(BlockQ8K) * blocks, 2);
  icount_mark(mark++);
  std::printf("i8mm q4_k %g tile %g ggml 2x2 q4_k %g q6_k %g\n", one, tile_out[0], g4[0], g6[0]);
  return 0;
}
