// The ggml tensor type ids used in GGUF files, and their block geometry.
//
// This is a pure table (no kernels): the GGUF parser validates sizes with it,
// the kernels layer attaches code to it. Ids match ggml's `enum ggml_type`;
// removed ids (4, 5, 31-33, 36-38) are not valid types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3,
  Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20,
  IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

inline constexpr uint32_t kGgmlTypeCount = 40;  // one past the largest id

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;    // ggml's spelling, e.g. "Q4_K"
  uint32_t block_elems;     // elements per block (1 for plain types)
  uint32_t block_bytes;     // bytes per block
};

// nullptr for an id that is not a (current) ggml type.
const GgmlTypeInfo* ggml_type_info(uint32_t id);
const GgmlTypeInfo& ggml_type_info(GgmlType t);
std::string_view ggml_type_name(GgmlType t);
// Name of any id, valid or not ("type 4 (removed)", "type 99 (unknown)").
std::string ggml_type_id_name(uint32_t id);
std::optional<GgmlType> ggml_type_from_name(std::string_view name);  // case-insensitive

// Bytes of a row of n elements; nullopt if n is not a multiple of the block size.
std::optional<uint64_t> ggml_row_bytes(GgmlType t, uint64_t n);

}  // namespace sluice
