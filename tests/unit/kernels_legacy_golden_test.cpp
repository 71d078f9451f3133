// Cross-check of the legacy quantizers against llama.cpp's llama-quantize:
// the golden quantized GGUFs in SLUICE_SHARED_DIR/golden were made from the
// F32 masters with llama-quantize (no importance matrix), so quantizing the
// master's rows with our scalar quantizers must reproduce their bytes. This
// pins the block layouts and the reference rounding of every format at once.
//
// Reads the files with a minimal, test-only GGUF tensor-table reader (the
// engine's real parser lives in src/gguf); skips when the data is absent.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "test_support.h"
#include "util/ggml_type.h"

namespace sluice::kernels {
namespace SLUICE_TEST_FILE {

bool is_legacy_quantized(GgmlType t) {
  switch (t) {
    case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q4_0: case GgmlType::Q4_1:
    case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0: case GgmlType::IQ4_NL:
    case GgmlType::MXFP4:
      return true;
    default:
      return false;
  }
}

struct Mismatch {
  uint64_t blocks = 0, differing_blocks = 0;
};

// Quantizes every row of the master tensor and compares block by block.
Mismatch compare_tensor(const gguf::GgufModel& mm, const gguf::TensorInfo& master,
                        const gguf::GgufModel& qm, const gguf::TensorInfo& quantized) {
  const GgmlType t = quantized.type;
  const std::vector<uint8_t> master_bytes = test::read_tensor_bytes(mm, master);
  const std::vector<uint8_t> quantized_bytes = test::read_tensor_bytes(qm, quantized);
  const GgmlTypeInfo& info = ggml_type_info(t);
  const uint64_t ne0 = quantized.ne[0];
  uint64_t rows = 1;
  for (size_t i = 1; i < quantized.ne.size(); ++i) rows *= quantized.ne[i];
  const size_t row_bytes = *ggml_row_bytes(t, ne0);
  std::vector<uint8_t> ours(row_bytes);
  Mismatch m;
  const auto* src = reinterpret_cast<const float*>(master_bytes.data());
  for (uint64_t r = 0; r < rows; ++r) {
    kernels_for(t, Isa::Scalar)->quantize(src + r * ne0, ours.data(), static_cast<int64_t>(ne0));
    const uint8_t* theirs = quantized_bytes.data() + r * row_bytes;
    for (size_t off = 0; off < row_bytes; off += info.block_bytes) {
      ++m.blocks;
      if (std::memcmp(ours.data() + off, theirs + off, info.block_bytes) != 0) ++m.differing_blocks;
    }
  }
  return m;
}

void check_case(const std::string& master_name, const std::string& quantized_name) {
  const std::string dir = test::shared_path("golden/");
  if (!std::ifstream(dir + master_name) || !std::ifstream(dir + quantized_name)) {
    GTEST_SKIP() << "golden GGUFs not found in " << dir;
  }
  const auto master = gguf::GgufModel::open(dir + master_name);
  const auto quantized = gguf::GgufModel::open(dir + quantized_name);
  std::map<GgmlType, Mismatch> per_type;
  for (const gguf::TensorInfo& q : quantized.tensors()) {
    const GgmlType t = q.type;
    if (!is_legacy_quantized(t)) continue;  // F32 copies; K-quants are checked elsewhere
    const gguf::TensorInfo* mt = master.find(q.name);
    ASSERT_NE(mt, nullptr) << q.name;
    ASSERT_EQ(mt->type, GgmlType::F32) << q.name << " is not F32 in the master";
    ASSERT_EQ(mt->ne, q.ne) << q.name;
    const Mismatch m = compare_tensor(master, *mt, quantized, q);
    per_type[t].blocks += m.blocks;
    per_type[t].differing_blocks += m.differing_blocks;
  }
  ASSERT_FALSE(per_type.empty());
  for (const auto& [t, m] : per_type) {
    SCOPED_TRACE(std::string(ggml_type_name(t)) + ": " + std::to_string(m.differing_blocks) + " of " +
                 std::to_string(m.blocks) + " blocks differ");
    if (t == GgmlType::IQ4_NL) {
      // Our scale search differs from ggml's by design (legacy_scalar_quantize.cpp).
      continue;
    }
    if (t == GgmlType::Q8_0) {
      // llama-quantize rounds half away from zero with multiplier 1/d; our Q8_0
      // quantizer follows llama.cpp's AVX2 activation path (half to even,
      // 127/amax). They agree except on exact ties and 1-ulp multiplier cases.
      EXPECT_LE(m.differing_blocks * 1000, m.blocks);
      continue;
    }
    EXPECT_EQ(m.differing_blocks, 0u);
  }
}

TEST(KernelsLegacyGolden, Q8_0AndQ4_0MatchLlamaQuantize) { check_case("qwen3moe-f32.gguf", "qwen3moe-q8_0-q4_0.gguf"); }

TEST(KernelsLegacyGolden, MixedFormatsMatchLlamaQuantize) { check_case("qwen3moe-f32.gguf", "qwen3moe-mixed.gguf"); }

TEST(KernelsLegacyGolden, LlamaQ8_0MatchesLlamaQuantize) { check_case("llama-moe-f32.gguf", "llama-moe-q8_0.gguf"); }

}  // namespace
}  // namespace sluice::kernels
