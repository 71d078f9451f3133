#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "util/fp16.h"
#include "util/ggml_type.h"

namespace sluice {
namespace SLUICE_TEST_FILE {

TEST(GgmlType, BlockGeometryMatchesFormatDefinitions) {
  EXPECT_EQ(ggml_type_info(GgmlType::Q4_0).block_bytes, 18u);
  EXPECT_EQ(ggml_type_info(GgmlType::Q4_K).block_bytes, 144u);
  EXPECT_EQ(ggml_type_info(GgmlType::Q6_K).block_bytes, 210u);
  EXPECT_EQ(ggml_type_info(GgmlType::MXFP4).block_bytes, 17u);
  EXPECT_EQ(ggml_type_info(GgmlType::Q8_K).block_bytes, 292u);
  EXPECT_EQ(*ggml_row_bytes(GgmlType::Q4_K, 2048), 8u * 144u);
  EXPECT_FALSE(ggml_row_bytes(GgmlType::Q4_K, 100).has_value());
}

TEST(GgmlType, RemovedAndUnknownIdsAreInvalid) {
  EXPECT_EQ(ggml_type_info(4u), nullptr);
  EXPECT_EQ(ggml_type_info(31u), nullptr);
  EXPECT_EQ(ggml_type_info(1000u), nullptr);
  EXPECT_EQ(ggml_type_id_name(4), "type 4 (removed from ggml)");
  EXPECT_EQ(ggml_type_id_name(99), "type 99 (unknown)");
  EXPECT_EQ(ggml_type_from_name("q4_k"), GgmlType::Q4_K);
  EXPECT_FALSE(ggml_type_from_name("Q4_2").has_value());
}

TEST(Fp16, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), h) << h;
  }
}

TEST(Fp16, KnownValuesAndRounding) {
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);               // rounds up to inf
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (zero)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_fp32(0x4049), 3.140625f);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace sluice
