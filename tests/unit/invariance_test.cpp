// Logits must be bit-identical (memcmp) whatever the storage and scheduling
// knobs: dense weight mode, O_DIRECT, io lanes, --load-all, compute threads.
// Only the KV cache type is allowed to change results.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "model_test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

class InvarianceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string json_path = shared_path("golden/" + GetParam() + ".json");
    if (!exists(json_path)) GTEST_SKIP() << "golden case " << json_path << " not found";
    std::ifstream jf(json_path);
    const nlohmann::json c = nlohmann::json::parse(jf);
    tokens_ = c["tokens"].get<std::vector<int32_t>>();
    mean_tolerance_ = c["tolerance"]["mean_abs_diff"].get<double>();
    path_ = shared_path("golden/" + GetParam() + ".gguf");
    baseline_ = logits(golden_config());
  }

  std::vector<float> logits(const model::ModelConfig& cfg) {
    auto m = load(path_, cfg);
    return eval_all(*m, tokens_);
  }

  void expect_identical(const model::ModelConfig& cfg, const std::string& what) {
    const auto got = logits(cfg);
    ASSERT_EQ(got.size(), baseline_.size()) << what;
    EXPECT_EQ(0, std::memcmp(got.data(), baseline_.data(), got.size() * sizeof(float))) << what;
  }

  std::string path_;
  std::vector<int32_t> tokens_;
  std::vector<float> baseline_;
  double mean_tolerance_ = 0;  // the case's golden mean |delta| limit
};

TEST_P(InvarianceTest, DenseModesAndODirect) {
  for (auto mode : {moe::DenseMode::Mmap, moe::DenseMode::Warm, moe::DenseMode::Anon}) {
    for (bool odirect : {false, true}) {
      auto cfg = golden_config();
      cfg.dense_mode = mode;
      cfg.odirect = odirect;
      expect_identical(cfg, std::string("dense ") + moe::dense_mode_name(mode) + (odirect ? " odirect" : " buffered"));
    }
  }
}

TEST_P(InvarianceTest, IoThreadsAndLoadAll) {
  for (int io : {1, 2, 4, 8}) {
    for (bool load_all : {false, true}) {
      auto cfg = golden_config();
      cfg.io_threads = io;
      cfg.load_all = load_all;
      expect_identical(cfg, "io_threads " + std::to_string(io) + (load_all ? " load_all" : ""));
    }
  }
}

TEST_P(InvarianceTest, IoEngineUringAtAnyDepth) {
  if (!io::uring_available()) GTEST_SKIP() << "this kernel gives no io_uring";
  for (int depth : {1, 8, 64}) {
    for (bool odirect : {false, true}) {
      for (uint64_t cache : {uint64_t{0}, uint64_t{256} << 20}) {
        auto cfg = golden_config();
        cfg.io_engine = io::IoEngine::Uring;
        cfg.io_depth = depth;
        cfg.odirect = odirect;
        cfg.cache_bytes = cache;
        expect_identical(cfg, "uring depth " + std::to_string(depth) + (odirect ? " odirect" : " buffered") +
                                  (cache ? " cache" : ""));
      }
    }
  }
}

TEST_P(InvarianceTest, ComputeThreads) {
  for (int t = 1; t <= 4; ++t) {
    auto cfg = golden_config();
    cfg.threads = t;
    expect_identical(cfg, "threads " + std::to_string(t));
  }
}

// Evaluating the sequence in pieces reuses the KV cache; the result must stay
// within float noise of the one-batch result, and be exactly reproducible.
TEST_P(InvarianceTest, IncrementalEvalIsDeterministicAndClose) {
  auto m = load(path_, golden_config());
  const size_t nv = m->hparams().n_vocab;
  auto run = [&] {
    m->reset();
    std::vector<float> out(tokens_.size() * nv);
    m->eval(std::span(tokens_).subspan(0, 10), 0, out.data());
    for (size_t i = 10; i < tokens_.size(); ++i) m->eval(std::span(tokens_).subspan(i, 1), static_cast<int>(i), &out[i * nv]);
    return out;
  };
  const auto a = run();
  const auto b = run();
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  double mean = 0;
  for (size_t i = 0; i < a.size(); ++i) mean += std::fabs(a[i] - baseline_[i]);
  mean /= static_cast<double>(a.size());
  EXPECT_LT(mean, 0.05);  // llama.cpp's own decode-vs-batch floor is of this order for quantized cases
}

// The F16 KV cache is a real change (it must not be silently ignored) yet stays
// within the case's golden tolerance (which covers llama.cpp's own F16 cache).
TEST_P(InvarianceTest, F16KvCacheDiffersSlightly) {
  auto cfg = golden_config();
  cfg.kv_type = model::KvType::F16;
  const auto got = logits(cfg);
  EXPECT_NE(0, std::memcmp(got.data(), baseline_.data(), got.size() * sizeof(float)));
  double mean = 0;
  for (size_t i = 0; i < got.size(); ++i) mean += std::fabs(got[i] - baseline_[i]);
  EXPECT_LT(mean / static_cast<double>(got.size()), mean_tolerance_);
}

INSTANTIATE_TEST_SUITE_P(Cases, InvarianceTest, ::testing::Values("qwen3moe-q8_0-q4_0", "qwen3moe-kquants", "gpt-oss-mxfp4", "glm4moe-q8_0",
                                           "deepseek2-q4_k", "qwen35moe-kquants", "gemma4-kquants", "gemma4-split-q8_0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace sluice::test
