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

#include "kernels/quant.h"
#include "util/ggml_type.h"

namespace sluice::kernels {
namespace {

struct TensorRef {
  uint32_t type = 0;
  std::vector<uint64_t> ne;
  const uint8_t* data = nullptr;
};

// Just enough GGUF (v3) to find each tensor's type, shape and bytes.
class MiniGguf {
 public:
  explicit MiniGguf(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    bytes_.assign(std::istreambuf_iterator<char>(f), {});
    if (take<uint32_t>() != 0x46554747u) throw std::runtime_error(path + ": not GGUF");
    take<uint32_t>();  // version
    const uint64_t n_tensors = take<uint64_t>(), n_kv = take<uint64_t>();
    uint64_t alignment = 32;
    for (uint64_t i = 0; i < n_kv; ++i) {
      const std::string key = take_string();
      const uint32_t type = take<uint32_t>();
      if (key == "general.alignment" && type == 4) {
        alignment = take<uint32_t>();
      } else {
        skip_value(type);
      }
    }
    std::map<std::string, std::pair<TensorRef, uint64_t>> infos;
    for (uint64_t i = 0; i < n_tensors; ++i) {
      const std::string name = take_string();
      TensorRef t;
      t.ne.resize(take<uint32_t>());
      for (uint64_t& d : t.ne) d = take<uint64_t>();
      t.type = take<uint32_t>();
      infos[name] = {t, take<uint64_t>()};
    }
    const uint64_t data_start = (pos_ + alignment - 1) / alignment * alignment;
    for (auto& [name, info] : infos) {
      info.first.data = bytes_.data() + data_start + info.second;
      tensors_[name] = info.first;
    }
  }
  const std::map<std::string, TensorRef>& tensors() const { return tensors_; }

 private:
  template <class T>
  T take() {
    if (pos_ + sizeof(T) > bytes_.size()) throw std::runtime_error("truncated GGUF");
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string take_string() {
    const uint64_t n = take<uint64_t>();
    if (pos_ + n > bytes_.size()) throw std::runtime_error("truncated GGUF");
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  void skip_value(uint32_t type) {
    static constexpr size_t kSizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) {
      take_string();
    } else if (type == 9) {
      const uint32_t elem = take<uint32_t>();
      const uint64_t count = take<uint64_t>();
      for (uint64_t i = 0; i < count; ++i) skip_value(elem);
    } else if (type < 13) {
      pos_ += kSizes[type];
    } else {
      throw std::runtime_error("bad GGUF value type");
    }
  }

  std::vector<uint8_t> bytes_;
  size_t pos_ = 0;
  std::map<std::string, TensorRef> tensors_;
};

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
Mismatch compare_tensor(const TensorRef& master, const TensorRef& quantized) {
  const auto t = static_cast<GgmlType>(quantized.type);
  const GgmlTypeInfo& info = ggml_type_info(t);
  const uint64_t ne0 = quantized.ne[0];
  uint64_t rows = 1;
  for (size_t i = 1; i < quantized.ne.size(); ++i) rows *= quantized.ne[i];
  const size_t row_bytes = *ggml_row_bytes(t, ne0);
  std::vector<uint8_t> ours(row_bytes);
  Mismatch m;
  const auto* src = reinterpret_cast<const float*>(master.data);
  for (uint64_t r = 0; r < rows; ++r) {
    kernels_for(t, Isa::Scalar)->quantize(src + r * ne0, ours.data(), static_cast<int64_t>(ne0));
    const uint8_t* theirs = quantized.data + r * row_bytes;
    for (size_t off = 0; off < row_bytes; off += info.block_bytes) {
      ++m.blocks;
      if (std::memcmp(ours.data() + off, theirs + off, info.block_bytes) != 0) ++m.differing_blocks;
    }
  }
  return m;
}

void check_case(const std::string& master_name, const std::string& quantized_name) {
  const std::string dir = std::string(SLUICE_SHARED_DIR) + "/golden/";
  if (!std::ifstream(dir + master_name) || !std::ifstream(dir + quantized_name)) {
    GTEST_SKIP() << "golden GGUFs not found in " << dir;
  }
  const MiniGguf master(dir + master_name), quantized(dir + quantized_name);
  std::map<GgmlType, Mismatch> per_type;
  for (const auto& [name, q] : quantized.tensors()) {
    const auto t = static_cast<GgmlType>(q.type);
    if (!is_legacy_quantized(t)) continue;  // F32 copies; K-quants are checked elsewhere
    const auto it = master.tensors().find(name);
    ASSERT_NE(it, master.tensors().end()) << name;
    ASSERT_EQ(it->second.type, 0u) << name << " is not F32 in the master";
    ASSERT_EQ(it->second.ne, q.ne) << name;
    const Mismatch m = compare_tensor(it->second, q);
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
