// deepseek4's keys: every key the forward pass needs is required, and a
// missing or unsupported one is an error naming the file and the key (copies
// of shared/golden/deepseek4-f32.gguf with one metadata entry dropped or
// replaced; describe() fails before any tensor data is read).
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "model_test_support.h"
#include "util/error.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

const char* const kCase = "golden/deepseek4-f32.gguf";

// The case's file with `key` dropped (replacement: nullopt) or replaced; zero tensor data.
std::string edited_copy(const std::string& key, const std::optional<gguf::Value>& replacement) {
  std::string tag = key;
  for (char& c : tag)
    if (c == '.') c = '_';
  const std::string path = process_temp_path("ds4_" + tag + ".gguf");
  write_edited_gguf(shared_path(kCase), path, key, replacement, true);
  return path;
}

// The error loading `path` gives ("" for none); the file is removed.
std::string load_error(const std::string& path) {
  std::string what;
  try {
    load(path, golden_config());
  } catch (const Error& e) {
    what = e.what();
  }
  std::filesystem::remove(path);
  return what;
}

TEST(Deepseek4Keys, EveryMissingKeyIsNamed) {
  if (!exists(shared_path(kCase))) GTEST_SKIP() << kCase << " not found";
  for (const char* k :
       {"attention.compress_ratios", "attention.compress_rope_freq_base", "attention.q_lora_rank",
        "attention.output_group_count", "attention.output_lora_rank", "attention.sliding_window",
        "attention.indexer.head_count", "attention.indexer.key_length", "attention.indexer.top_k",
        "hyper_connection.count", "hyper_connection.sinkhorn_iterations",
        "hyper_connection.epsilon", "hash_layer_count", "swiglu_clamp_exp", "expert_shared_count",
        "expert_weights_scale", "expert_gating_func"}) {
    const std::string key = std::string("deepseek4.") + k;
    const std::string path = edited_copy(key, std::nullopt);
    EXPECT_EQ(load_error(path), path + ": missing metadata key " + key);
  }
}

TEST(Deepseek4Keys, UnsupportedValuesAreNamed) {
  if (!exists(shared_path(kCase))) GTEST_SKIP() << kCase << " not found";
  const std::string ratios =
      edited_copy("deepseek4.attention.compress_ratios", gguf::Value::from_i32s({8, 128, 0}));
  EXPECT_EQ(load_error(ratios),
            ratios +
                ": invalid metadata deepseek4.attention.compress_ratios: entry 0 is 8 "
                "(only 0, 4 and 128 are supported)");
  const std::string short_ratios =
      edited_copy("deepseek4.attention.compress_ratios", gguf::Value::from_i32s({4, 128}));
  EXPECT_EQ(
      load_error(short_ratios),
      short_ratios +
          ": invalid metadata deepseek4.attention.compress_ratios: has 2 entries for 3 layers");
  const std::string gating = edited_copy("deepseek4.expert_gating_func", gguf::Value::from_u32(2));
  EXPECT_EQ(load_error(gating),
            gating + ": invalid metadata deepseek4.expert_gating_func: must be 4 (sqrt-softplus)");
  const std::string hc = edited_copy("deepseek4.hyper_connection.count", gguf::Value::from_u32(2));
  EXPECT_EQ(
      load_error(hc),
      hc +
          ": invalid metadata deepseek4.hyper_connection.count: must be 4 (as llama.cpp requires)");
  const std::string groups =
      edited_copy("deepseek4.attention.output_group_count", gguf::Value::from_u32(3));
  EXPECT_EQ(
      load_error(groups),
      groups +
          ": invalid metadata deepseek4.attention.output_group_count: 3 must divide head_count 4");
}

}  // namespace
}  // namespace sluice::test
