// The really trained stories-moe-8x model (shared/models/README.md): greedy
// continuation of "Once upon a time" must reproduce llama.cpp's token ids.
// Prompt ids [1, 403, 407, 261, 378] are the README's tokenization (with BOS).
#include <gtest/gtest.h>

#include "model_test_support.h"
#include "tokenizer/tokenizer.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378};

const std::vector<int32_t> kGreedyF32 = {
    432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322,
    265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267,
    337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 387, 311, 426, 13,  438, 310, 439, 419};

const std::vector<int32_t> kGreedyQ8 = {
    432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322,
    265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 262, 415, 271, 422, 268, 388, 426, 338, 391,
    266, 267, 262, 411, 411, 263, 415, 294, 286, 322, 419, 292, 411, 426, 338, 261, 419, 355, 311, 357};

const std::vector<int32_t> kGreedyDense = {
    432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322,
    265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267,
    337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13,  438, 310, 439, 419, 357, 336};

void check_greedy(const std::string& file, const std::vector<int32_t>& want, model::KvType kv) {
  const std::string path = shared_path("models/" + file);
  if (!exists(path)) GTEST_SKIP() << path << " not found";
  auto cfg = golden_config();
  cfg.kv_type = kv;
  auto m = load(path, cfg);
  EXPECT_EQ(greedy(*m, kPrompt, static_cast<int>(want.size())), want);
}

TEST(ModelStories, MoeF32GreedyMatchesLlamaCpp) { check_greedy("stories-moe-8x-f32.gguf", kGreedyF32, model::KvType::F32); }
TEST(ModelStories, MoeF16GreedyMatchesLlamaCpp) { check_greedy("stories-moe-8x-f16.gguf", kGreedyF32, model::KvType::F32); }
TEST(ModelStories, MoeQ8GreedyMatchesLlamaCpp) { check_greedy("stories-moe-8x-q8_0.gguf", kGreedyQ8, model::KvType::F32); }
TEST(ModelStories, DenseGreedyMatchesLlamaCpp) { check_greedy("stories260k-f32.gguf", kGreedyDense, model::KvType::F32); }
TEST(ModelStories, MoeF32GreedyWithF16KvCache) { check_greedy("stories-moe-8x-f32.gguf", kGreedyF32, model::KvType::F16); }

TEST(ModelStories, TokenizedPromptAndDecodedText) {
  const std::string path = shared_path("models/stories-moe-8x-f32.gguf");
  if (!exists(path)) GTEST_SKIP() << path << " not found";
  const auto g = gguf::GgufModel::open(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(g.metadata());
  EXPECT_EQ(tok.encode("Once upon a time", true, false), kPrompt);
  std::vector<int32_t> all = kPrompt;
  all.insert(all.end(), kGreedyF32.begin(), kGreedyF32.end());
  EXPECT_EQ(tok.decode(std::span(all).subspan(1), false),
            "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, "
            "she saw a big, red ball. She wanted to play with it, but it was too high for her.\nLily's");
}

}  // namespace
}  // namespace sluice::test
