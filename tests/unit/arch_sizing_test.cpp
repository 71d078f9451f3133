// inspect's sizing follows the architecture's declaration: the KV cache as the
// engine allocates it (MLA: the latent row, not per-head K/V) and NextN/MTP
// blocks neither dense nor streamed.
#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "model_test_support.h"
#include "tools/model_info.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

tools::ModelInfo info_of(const std::string& rel) {
  return tools::model_info(gguf::GgufModel::open(shared_path(rel)), 4096);
}

TEST(ArchSizing, MlaKvCacheIsTheLatentRowPerPosition) {
  REQUIRE_SHARED("golden/deepseek2-mtp-f32.gguf");
  const tools::ModelInfo i = info_of("golden/deepseek2-mtp-f32.gguf");
  // 3 trunk layers (block_count 4 with one NextN block) x 4096 positions x
  // (kv_lora_rank 64 + rope 16) x 2 bytes; per-head K/V would be 4 heads x (48 + 32).
  EXPECT_EQ(i.sizing.kv_bytes, uint64_t{3} * 4096 * (64 + 16) * 2);
  EXPECT_EQ(i.sizing.kv_layout, "mla-latent");
  EXPECT_TRUE(i.not_runnable.empty()) << i.not_runnable;
}

TEST(ArchSizing, NextnBlocksAreNeitherDenseNorStreamed) {
  for (const char* rel : {"golden/deepseek2-mtp-f32.gguf", "golden/glm4moe-f32.gguf"}) {
    REQUIRE_SHARED(rel);
    const gguf::GgufModel g = gguf::GgufModel::open(shared_path(rel));
    const tools::ModelInfo i = tools::model_info(g, 4096);
    // The last block is the NextN head: every one of its tensors is counted apart.
    const std::string last = "blk." + std::to_string(*i.hp.block_count - 1) + ".";
    uint64_t nextn = 0;
    for (const gguf::TensorInfo& t : g.tensors())
      if (t.name.rfind(last, 0) == 0) nextn += t.bytes;
    EXPECT_GT(nextn, 0u) << rel;
    EXPECT_EQ(i.sizing.not_loaded_bytes, nextn) << rel;
    EXPECT_EQ(i.sizing.dense_bytes + i.sizing.expert_bytes + nextn, i.sizing.total_bytes) << rel;
    for (const tools::LayerSizing& l : i.sizing.layers) EXPECT_LT(l.layer, *i.hp.block_count - 1) << rel;
  }
}

TEST(ArchSizing, UnsupportedFilesStillInspectAndSayWhy) {
  REQUIRE_SHARED("golden/qwen3moe-f32.gguf");
  const tools::ModelInfo i = info_of("golden/qwen3moe-f32.gguf");
  EXPECT_TRUE(i.not_runnable.empty());
  EXPECT_EQ(i.sizing.kv_layout, "per-head");
  EXPECT_EQ(i.sizing.kv_bytes, uint64_t{3} * 4096 * 2 * (64 + 64) * 2);  // 3 layers, 2 KV heads of 64
}

}  // namespace
}  // namespace sluice::test
