// The expert cache seen from the engine: it must be transparent (logits
// bit-identical at any budget, decode and batch), sized once at load
// (fixed budgets checked against the mechanical floor, auto from meminfo
// text), and its hits visible in --route-trace records and ExpertIoStats.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "model_test_support.h"
#include "moe/cache_budget.h"
#include "moe/route_trace.h"
#include "util/error.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

const char* kModel = "golden/qwen3moe-q8_0-q4_0.gguf";
constexpr int kTokens = 24;

// 24 tokens with repeats (so a cache has something to hit within one pass).
std::vector<int32_t> sequence(uint32_t n_vocab) {
  std::vector<int32_t> t;
  for (int i = 0; i < kTokens; ++i) t.push_back(static_cast<int32_t>((1 + (i % 9) * 97 + i / 9 * 13) % n_vocab));
  return t;
}

struct Shape {
  uint64_t expert_bytes = 0;  // widest layer's expert (gate+up+down)
  uint64_t all_experts = 0;   // every expert of every layer
  int n_layer = 0, n_expert = 0, top_k = 0;
};

Shape model_shape(const std::string& path) {
  const gguf::GgufModel g = gguf::GgufModel::open(path);
  Shape s;
  for (int il = 0; g.find("blk." + std::to_string(il) + ".attn_norm.weight"); ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const gguf::TensorInfo* gate = g.find(p + "ffn_gate_exps.weight");
    if (!gate) continue;  // a dense layer (leading dense layers of glm4moe / deepseek2)
    uint64_t b = 0;
    for (const char* n : {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"})
      b += g.expert_range(g.require(p + n), 0).bytes;
    s.expert_bytes = std::max(s.expert_bytes, b);
    s.n_expert = static_cast<int>(gate->ne[2]);
    s.all_experts += b * static_cast<uint64_t>(s.n_expert);
    s.n_layer = il + 1;
  }
  return s;
}

model::ModelConfig config_with_cache(uint64_t bytes) {
  model::ModelConfig c = golden_config();
  c.cache_bytes = bytes;
  return c;
}

// Logits of every position, one token per eval (decode).
std::vector<float> eval_decode(model::Model& m, const std::vector<int32_t>& tokens) {
  m.reset();
  const size_t nv = m.hparams().n_vocab;
  std::vector<float> out(tokens.size() * nv);
  for (size_t i = 0; i < tokens.size(); ++i)
    m.eval(std::span<const int32_t>(&tokens[i], 1), static_cast<int>(i), &out[i * nv]);
  return out;
}


class CacheEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = shared_path(kModel);
    if (!exists(path_)) GTEST_SKIP() << path_ << " not found";
    shape_ = model_shape(path_);
    auto m = load(path_, golden_config());
    shape_.top_k = static_cast<int>(m->hparams().n_expert_used);
    tokens_ = sequence(m->hparams().n_vocab);
    floor_ = static_cast<uint64_t>(shape_.top_k) * shape_.expert_bytes;  // decode: ubatch 1
  }
  std::string path_;
  Shape shape_;
  std::vector<int32_t> tokens_;
  uint64_t floor_ = 0;
};

// Every cache budget from the floor to all experts gives the cache-off bits,
// at decode and in one batch, on a cold and a warm cache.
void expect_cache_transparent(const std::string& path_, const Shape& shape_, const std::vector<int32_t>& tokens_,
                              uint64_t floor_) {
  ASSERT_GT(shape_.n_layer, 0);
  auto off = load(path_, golden_config());
  const std::vector<float> want_decode = eval_decode(*off, tokens_);
  const std::vector<float> want_batch = eval_all(*off, tokens_);
  const uint64_t budgets[] = {floor_, (floor_ + shape_.all_experts) / 2, 2 * shape_.all_experts};
  for (uint64_t budget : budgets) {
    SCOPED_TRACE("cache budget " + std::to_string(budget) + " bytes");
    auto m = load(path_, config_with_cache(budget));
    EXPECT_TRUE(same_bits(eval_decode(*m, tokens_), want_decode));
    EXPECT_TRUE(same_bits(eval_all(*m, tokens_), want_batch));
    // Twice more: the second pass runs on a warm cache.
    EXPECT_TRUE(same_bits(eval_decode(*m, tokens_), want_decode));
    const moe::ExpertIoStats io = m->stats().io;
    // At the floor the LRU holds about one token's layer: repeats can all miss.
    if (budget > floor_) {
      EXPECT_GT(io.experts_hit, 0u);
    }
    EXPECT_LE(io.cache_peak_bytes, std::max<uint64_t>(budget, 1));
    EXPECT_EQ(io.cache_budget_bytes, budget);
  }
}

TEST_F(CacheEngine, LogitsBitIdenticalAtEveryBudgetDecodeAndBatch) {
  expect_cache_transparent(path_, shape_, tokens_, floor_);
}

// The same on the other architectures: gpt-oss (MXFP4 experts with resident
// per-expert biases, sinks, sliding window, softmax over the selected),
// glm4moe and deepseek2 (leading dense layer, shared expert, sigmoid routing;
// MLA and grouped selection for deepseek2).
TEST(CacheEngineArchitectures, LogitsBitIdenticalAtEveryBudgetDecodeAndBatch) {
  for (const char* name : {"gpt-oss-mxfp4", "glm4moe-q8_0", "deepseek2-q4_k"}) {
    SCOPED_TRACE(name);
    const std::string path = shared_path(std::string("golden/") + name + ".gguf");
    if (!exists(path)) GTEST_SKIP() << path << " not found";
    Shape shape = model_shape(path);
    auto m = load(path, golden_config());
    shape.top_k = static_cast<int>(m->hparams().n_expert_used);
    expect_cache_transparent(path, shape, sequence(m->hparams().n_vocab),
                             static_cast<uint64_t>(shape.top_k) * shape.expert_bytes);
  }
}

TEST_F(CacheEngine, BelowFloorIsAnErrorNamingTheFlag) {
  try {
    load(path_, config_with_cache(floor_ - 1));
    FAIL() << "a budget below the floor loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--cache-mb"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mechanical floor"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(load(path_, config_with_cache(floor_)));
}

TEST_F(CacheEngine, BelowTokenDemandWarnsOnce) {
  std::vector<std::string> lines;
  model::ModelConfig c = config_with_cache(floor_);
  c.log = [&lines](const std::string& l) { lines.push_back(l); };
  load(path_, c);
  ASSERT_EQ(lines.size(), 2u);  // the sizing line, then the warning
  EXPECT_NE(lines[1].find("below one token's expert demand"), std::string::npos) << lines[1];
  lines.clear();
  load(path_, config_with_cache(shape_.all_experts));  // no log sink: silent, no crash
  c.cache_bytes = shape_.all_experts;
  load(path_, c);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].find("warning"), std::string::npos) << lines[0];
}

TEST_F(CacheEngine, BigCacheServesARepeatFromMemory) {
  auto m = load(path_, config_with_cache(2 * shape_.all_experts));
  eval_decode(*m, tokens_);
  const moe::ExpertIoStats first = m->stats().io;
  eval_decode(*m, tokens_);
  const moe::ExpertIoStats second = m->stats().io;
  EXPECT_EQ(second.experts_read, first.experts_read) << "everything fits: the repeat reads nothing";
  EXPECT_EQ(second.bytes_read, first.bytes_read);
  const uint64_t touched = static_cast<uint64_t>(kTokens) * shape_.n_layer * shape_.top_k;
  EXPECT_EQ(second.experts_hit - first.experts_hit, touched);  // hit % of the repeat: 100
  EXPECT_EQ(first.experts_hit + first.experts_read, touched);
}

TEST_F(CacheEngine, RouteTraceRecordsEveryTokenAndLayerWithHits) {
  const std::filesystem::path file = process_temp_path("cache_engine_trace.jsonl");
  model::ModelConfig c = config_with_cache((floor_ + shape_.all_experts) / 2);
  c.route_trace = std::make_shared<moe::RouteTraceWriter>(file.string());
  auto m = load(path_, c);
  eval_decode(*m, tokens_);
  const moe::ExpertIoStats io = m->stats().io;
  c.route_trace->close();

  const moe::RouteTrace tr = moe::read_route_trace(file.string());
  ASSERT_EQ(tr.records.size(), static_cast<size_t>(kTokens) * shape_.n_layer);
  uint64_t hits = 0, misses = 0;
  for (size_t i = 0; i < tr.records.size(); ++i) {
    const moe::RouteRecord& r = tr.records[i];
    EXPECT_EQ(r.pos, static_cast<int64_t>(i) / shape_.n_layer);  // token-major
    EXPECT_EQ(r.layer, static_cast<int>(i) % shape_.n_layer);
    ASSERT_EQ(r.experts.size(), static_cast<size_t>(shape_.top_k));
    ASSERT_EQ(r.weights.size(), r.experts.size());
    ASSERT_EQ(r.hit.size(), r.experts.size());
    float sum = 0;
    for (size_t s = 0; s < r.experts.size(); ++s) {
      EXPECT_GE(r.experts[s], 0);
      EXPECT_LT(r.experts[s], shape_.n_expert);
      if (s > 0) {
        EXPECT_LE(r.weights[s], r.weights[s - 1]);  // descending gate weight
      }
      sum += r.weights[s];
      (r.hit[s] ? hits : misses) += 1;
    }
    EXPECT_NEAR(sum, 1.0f, 1e-4f);  // qwen3moe renormalises the top-k
  }
  // Decode fetches each token's experts on their own: the trace and the
  // counters describe the same accesses.
  EXPECT_EQ(hits, io.experts_hit);
  EXPECT_EQ(misses, io.experts_read);
  EXPECT_GT(hits, 0u);
  std::filesystem::remove(file);
}

TEST_F(CacheEngine, AutoSizesFromMeminfoAndClamps) {
  std::vector<std::string> lines;
  model::ModelConfig c = golden_config();
  c.cache_auto = true;
  c.log = [&lines](const std::string& l) { lines.push_back(l); };
  // Plenty of memory: capped at every expert of the model (whole MiB).
  c.cache_meminfo = "MemTotal: 99999999 kB\nMemAvailable: 67108864 kB\n";  // 64 GiB
  auto big = load(path_, c);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("cache: --cache-mb auto: MemAvailable 65536 MiB"), std::string::npos) << lines[0];
  const uint64_t cap_mib = (shape_.all_experts + moe::kMiB - 1) / moe::kMiB;
  EXPECT_NE(lines[0].find("cache budget " + std::to_string(cap_mib) + " MiB."), std::string::npos) << lines[0];
  // An explicit ceiling of 0 keeps that; a floor above it wins the clamp.
  lines.clear();
  c.cache_meminfo = "MemAvailable: 1024 kB\n";  // far below the headroom
  c.cache_floor_bytes = 3 * moe::kMiB;
  auto small = load(path_, c);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("cache budget 3 MiB."), std::string::npos) << lines[0];
  EXPECT_EQ(small->stats().io.cache_budget_bytes, 3 * moe::kMiB);
  EXPECT_EQ(big->stats().io.cache_budget_bytes, cap_mib * moe::kMiB);
  // Transparent at the size it chose.
  auto off = load(path_, golden_config());
  EXPECT_TRUE(same_bits(eval_decode(*small, tokens_), eval_decode(*off, tokens_)));
  c.cache_meminfo = "MemTotal: 1 kB\n";
  EXPECT_THROW(load(path_, c), Error);  // no MemAvailable line
}

TEST_F(CacheEngine, CliLogitsWithCacheAutoPrintsTheSizingLine) {
  std::string list;
  for (int32_t t : tokens_) list += (list.empty() ? "" : ",") + std::to_string(t);
  const std::string out = process_temp_path("cache_engine_logits.f32");
  const std::string cmd = std::string(SLUICE_BINARY) + " logits -m " + path_ + " --tokens " + list + " -o " + out +
                          " --kv-type f32 -t 2 --no-odirect --cache-mb auto 2>&1";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string text;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) text.append(buf, n);
  ASSERT_EQ(::pclose(p), 0) << text;
  EXPECT_NE(text.find("cache: --cache-mb auto: MemAvailable"), std::string::npos) << text;
  auto m = load(path_, golden_config());
  EXPECT_TRUE(same_bits(read_f32_file(out), eval_all(*m, tokens_)));

  const std::string bad = std::string(SLUICE_BINARY) + " logits -m " + path_ + " --tokens 1 -o " + out +
                          " --cache-mb lots 2>&1";
  p = ::popen(bad.c_str(), "r");
  ASSERT_NE(p, nullptr);
  text.clear();
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) text.append(buf, n);
  EXPECT_NE(::pclose(p), 0);
  EXPECT_NE(text.find("--cache-mb"), std::string::npos) << text;
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace sluice::test
