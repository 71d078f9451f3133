// Every GGUF in the shared reference data parses; golden models' tensor infos
// match the tensor_types lists that gguf-py recorded in NAME.json.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "util/error.h"

namespace sluice::gguf {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;

std::vector<fs::path> shared_ggufs() {
  std::vector<fs::path> out;
  for (const char* sub : {"golden", "models", "vocab"}) {
    const fs::path dir = fs::path(SLUICE_SHARED_DIR) / sub;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".gguf") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GgufShared, EveryReferenceFileParses) {
  const auto files = shared_ggufs();
  if (files.empty()) GTEST_SKIP() << "no .gguf files under " << SLUICE_SHARED_DIR;
  for (const auto& p : files) {
    SCOPED_TRACE(p.string());
    try {
      GgufModel m = GgufModel::open(p.string());
      EXPECT_FALSE(m.metadata().entries().empty());
      EXPECT_GE(m.split(0).version, 2u);
      for (const TensorInfo& t : m.tensors()) {
        EXPECT_EQ(t.offset % m.split(0).alignment, 0u) << t.name;
        EXPECT_LE(t.offset + t.bytes, m.split(0).file_size) << t.name;
      }
      if (p.parent_path().filename() == "vocab") {
        auto tokens = m.metadata().get_string_array("tokenizer.ggml.tokens");
        ASSERT_TRUE(tokens.has_value());
        EXPECT_GT(tokens->size(), 1000u);
      }
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

TEST(GgufShared, GoldenTensorInfosMatchJson) {
  const fs::path dir = fs::path(SLUICE_SHARED_DIR) / "golden";
  std::vector<fs::path> jsons;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") jsons.push_back(e.path());
  if (jsons.empty()) GTEST_SKIP() << "no golden cases under " << dir;
  for (const auto& jp : jsons) {
    SCOPED_TRACE(jp.string());
    const nlohmann::json j = nlohmann::json::parse(std::ifstream(jp));
    const fs::path gguf = dir / j.at("gguf").get<std::string>();
    GgufModel m = GgufModel::open(gguf.string());
    EXPECT_EQ(m.split(0).file_size, j.at("gguf_bytes").get<uint64_t>());
    EXPECT_EQ(m.architecture(), j.at("arch").get<std::string>());
    const auto& list = j.at("tensor_types");
    EXPECT_EQ(m.tensors().size(), list.size());
    for (const auto& entry : list) {
      const std::string name = entry.at(0).get<std::string>();
      const TensorInfo* t = m.find(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(ggml_type_name(t->type), entry.at(1).get<std::string>()) << name;
      EXPECT_EQ(t->ne, entry.at(2).get<std::vector<uint64_t>>()) << name;
    }
  }
}

// A shape checked by hand against the README (qwen3moe-f32: n_embd 256, 16 experts, expert FFN 256).
TEST(GgufShared, Qwen3MoeExpertTensorShape) {
  const fs::path p = fs::path(SLUICE_SHARED_DIR) / "golden" / "qwen3moe-f32.gguf";
  if (!fs::exists(p)) GTEST_SKIP() << p << " missing";
  GgufModel m = GgufModel::open(p.string());
  const TensorInfo& gate = m.require("blk.0.ffn_gate_exps.weight");
  EXPECT_EQ(gate.type, GgmlType::F32);
  EXPECT_EQ(gate.ne, (std::vector<uint64_t>{256, 256, 16}));
  EXPECT_EQ(gate.bytes, 256u * 256u * 16u * 4u);
  const ByteRange r = m.expert_range(gate, 5);
  EXPECT_EQ(r.bytes, 256u * 256u * 4u);
  EXPECT_EQ(r.offset, gate.offset + 5 * r.bytes);
  EXPECT_EQ(m.metadata().get_uint("qwen3moe.expert_count"), 16u);
}

}  // namespace
}  // namespace sluice::gguf
