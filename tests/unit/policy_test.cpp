// Routing trims wired into the forward pass (model::ModelConfig::trims,
// ubatch), the `eval` quality/I-O comparison (bench/eval.h) and the CLI
// flags that reach them. Golden and stories models from shared/.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/engine_flags.h"
#include "model_test_support.h"
#include "bench/eval.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

const char* const kStories = "models/stories-moe-8x-f32.gguf";
const char* const kCorpus = "models/corpus_eval.txt";

std::vector<int32_t> golden_tokens(const std::string& name) {
  std::ifstream jf(shared_path("golden/" + name + ".json"));
  return nlohmann::json::parse(jf)["tokens"].get<std::vector<int32_t>>();
}


// Cache off, page-cache reads: every fetch of an expert counts as a read.
model::ModelConfig streaming_config() {
  model::ModelConfig c = golden_config();
  c.odirect = false;
  return c;
}

// The first `n` tokens of the eval corpus (no BOS), tokenized by the stories model.
std::vector<int32_t> corpus_tokens(size_t n) {
  auto g = std::make_shared<const gguf::GgufModel>(gguf::GgufModel::open(shared_path(kStories)));
  const auto tok = tokenizer::Tokenizer::from_gguf(g->metadata());
  std::ifstream f(shared_path(kCorpus), std::ios::binary);
  std::string text(16384, '\0');  // a few thousand tokens' worth
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(f.gcount()));
  std::vector<int32_t> ids = tok.encode(text, false, false);
  if (ids.size() > n) ids.resize(n);
  return ids;
}

// ---- exact no-ops ------------------------------------------------------------

class PolicyNoOp : public ::testing::TestWithParam<std::string> {};

TEST_P(PolicyNoOp, NoOpTrimsAndUbatchSizeAreBitIdentical) {
  const std::string name = GetParam();
  REQUIRE_SHARED("golden/" + name + ".gguf");
  const std::string path = shared_path("golden/" + name + ".gguf");
  const auto tokens = golden_tokens(name);
  auto base_model = load(path, streaming_config());
  const auto base = eval_all(*base_model, tokens);
  const model::ModelStats base_stats = base_model->stats();
  const auto& hp = base_model->hparams();
  // Trims off: every routed entry kept.
  EXPECT_EQ(base_stats.trims.routed, static_cast<int64_t>(tokens.size()) * hp.n_expert_used * hp.n_layer);
  EXPECT_EQ(base_stats.trims.kept, base_stats.trims.routed);

  struct Case {
    const char* what;
    void (*set)(model::ModelConfig&, const model::HParams&);
  };
  const Case cases[] = {
      {"top-p 1", [](model::ModelConfig& c, const model::HParams&) { c.trims.top_p = 1.0f; }},
      {"budget = n_expert (>= any union)",
       [](model::ModelConfig& c, const model::HParams& h) { c.trims.expert_budget = static_cast<int>(h.n_expert); }},
      {"top-k = model's k",
       [](model::ModelConfig& c, const model::HParams& h) { c.trims.top_k = static_cast<int>(h.n_expert_used); }},
      {"ubatch 5", [](model::ModelConfig& c, const model::HParams&) { c.ubatch = 5; }},
      {"ubatch 1", [](model::ModelConfig& c, const model::HParams&) { c.ubatch = 1; }},
      {"drop-cold with every expert resident",
       [](model::ModelConfig& c, const model::HParams&) {
         c.load_all = true;
         c.trims.drop_cold = 0.5f;
       }},
  };
  for (const Case& cs : cases) {
    model::ModelConfig cfg = streaming_config();
    cs.set(cfg, hp);
    auto m = load(path, cfg);
    EXPECT_TRUE(same_bits(eval_all(*m, tokens), base)) << name << ": " << cs.what;
    EXPECT_EQ(m->stats().trims.dropped(), 0) << name << ": " << cs.what;
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, PolicyNoOp, ::testing::Values("qwen3moe-f32", "llama-moe-f32", "llama-moe-q8_0"));

TEST(PolicyNoOp, BudgetEqualToTheUnionIsBitIdentical) {
  REQUIRE_SHARED(kStories);
  const auto tokens = corpus_tokens(40);
  auto base_model = load(shared_path(kStories), streaming_config());
  const auto base = eval_all(*base_model, tokens);
  // With one ubatch and the cache off, experts_read is the sum over layers of
  // the union sizes: a budget of the largest union is a no-op.
  const auto& hp = base_model->hparams();
  const uint64_t read = base_model->stats().io.experts_read;
  ASSERT_GT(read, 0u);
  // The union of 40 positions routed to 2 of 8 experts is 8 in every layer of this model.
  ASSERT_EQ(read, uint64_t{hp.n_layer} * hp.n_expert);
  model::ModelConfig cfg = streaming_config();
  cfg.trims.expert_budget = static_cast<int>(hp.n_expert);
  auto m = load(shared_path(kStories), cfg);
  EXPECT_TRUE(same_bits(eval_all(*m, tokens), base));
  cfg.trims.expert_budget = static_cast<int>(hp.n_expert) - 1;  // one below the union: must change
  auto m2 = load(shared_path(kStories), cfg);
  EXPECT_FALSE(same_bits(eval_all(*m2, tokens), base));
  EXPECT_EQ(m2->stats().io.experts_read, uint64_t{hp.n_layer} * (hp.n_expert - 1));
}

// ---- trims that act ------------------------------------------------------------

TEST(PolicyTrims, TopK1ChangesLogitsAndReadsFewerExperts) {
  const std::string name = "llama-moe-f32";
  REQUIRE_SHARED("golden/" + name + ".gguf");
  const std::string path = shared_path("golden/" + name + ".gguf");
  const auto tokens = golden_tokens(name);
  model::ModelConfig cfg = streaming_config();
  cfg.ubatch = 1;  // one position per ubatch: experts read == routed entries
  auto base_model = load(path, cfg);
  const auto base = eval_all(*base_model, tokens);
  const auto& hp = base_model->hparams();
  ASSERT_GT(hp.n_expert_used, 1u);
  cfg.trims.top_k = 1;
  auto m = load(path, cfg);
  const auto got = eval_all(*m, tokens);
  EXPECT_FALSE(same_bits(got, base));
  const uint64_t n_pos_layers = tokens.size() * hp.n_layer;
  EXPECT_EQ(base_model->stats().io.experts_read, n_pos_layers * hp.n_expert_used);
  EXPECT_EQ(m->stats().io.experts_read, n_pos_layers);
  EXPECT_EQ(m->stats().trims.routed, static_cast<int64_t>(n_pos_layers));
  EXPECT_THROW(
      {
        model::ModelConfig bad = streaming_config();
        bad.trims.top_k = static_cast<int>(hp.n_expert) + 1;
        load(path, bad);
      },
      Error);
}

// With k = 2 and renormalised weights the top-1 always holds >= half the mass,
// so top-p 0.5 trims every row to its top-1 with weight 1 — the same table
// (bit for bit) as selecting k = 1. This checks the variable-length-row path
// of the forward pass against the fixed-k one.
TEST(PolicyTrims, TopP05EqualsTopK1ForTopTwoRouting) {
  REQUIRE_SHARED(kStories);
  const auto tokens = corpus_tokens(100);
  model::ModelConfig cfg = streaming_config();
  cfg.ubatch = 16;
  cfg.trims.top_k = 1;
  auto k1 = load(shared_path(kStories), cfg);
  ASSERT_EQ(k1->hparams().n_expert_used, 2u);
  cfg.trims.top_k = 0;
  cfg.trims.top_p = 0.5f;
  auto p05 = load(shared_path(kStories), cfg);
  EXPECT_TRUE(same_bits(eval_all(*k1, tokens), eval_all(*p05, tokens)));
  EXPECT_EQ(p05->stats().trims.dropped_by_top_p, p05->stats().trims.kept);  // one of two dropped everywhere
  EXPECT_EQ(p05->stats().io.experts_read, k1->stats().io.experts_read);
}

TEST(PolicyTrims, BudgetOneReadsAtMostOneExpertPerLayerPerUbatch) {
  REQUIRE_SHARED(kStories);
  const auto tokens = corpus_tokens(200);
  ASSERT_EQ(tokens.size(), 200u);
  model::ModelConfig cfg = streaming_config();
  cfg.ubatch = 64;
  cfg.trims.expert_budget = 1;
  auto m = load(shared_path(kStories), cfg);
  const auto logits = eval_all(*m, tokens);
  const auto& hp = m->hparams();
  const uint64_t n_ubatches = (200 + 63) / 64;  // 4
  const model::ModelStats st = m->stats();
  // Every ubatch of every layer has a non-empty union, cut to exactly one expert.
  EXPECT_EQ(st.io.experts_read, uint64_t{hp.n_layer} * n_ubatches);
  EXPECT_GT(st.trims.dropped_by_budget, 0);
  EXPECT_EQ(st.trims.routed, st.trims.kept + st.trims.dropped());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  // Positions whose experts were all cut have empty rows: the forward pass copes.
  EXPECT_GT(st.trims.positions_emptied, 0);
}

TEST(PolicyTrims, DropColdWithCacheOffDropsLightExperts) {
  REQUIRE_SHARED(kStories);
  const auto tokens = corpus_tokens(64);
  model::ModelConfig cfg = streaming_config();
  cfg.ubatch = 1;  // experts read == entries kept
  auto base_model = load(shared_path(kStories), cfg);
  const auto base = eval_all(*base_model, tokens);
  cfg.trims.drop_cold = 0.45f;  // cache off: every expert is a miss
  auto m = load(shared_path(kStories), cfg);
  EXPECT_FALSE(same_bits(eval_all(*m, tokens), base));
  const model::ModelStats st = m->stats();
  EXPECT_GT(st.trims.dropped_by_cold, 0);
  EXPECT_EQ(st.trims.positions_emptied, 0);  // a position's top-1 is never dropped
  EXPECT_EQ(st.io.experts_read, static_cast<uint64_t>(st.trims.kept));
  EXPECT_EQ(base_model->stats().io.experts_read, static_cast<uint64_t>(st.trims.routed));
}

// ---- eval ----------------------------------------------------------------------

TEST(PolicyEval, NoTrimsAgainstItselfAndPerplexityInRange) {
  REQUIRE_SHARED(kStories);
  REQUIRE_SHARED(kCorpus);
  const auto text = corpus_tokens(600);
  auto a = load(shared_path(kStories), streaming_config());
  auto b = load(shared_path(kStories), streaming_config());
  bench::EvalOptions eo;
  eo.ctx = 256;
  eo.bos = 1;
  eo.batch = 64;
  const bench::EvalResult r = bench::evaluate_text(*a, b.get(), text, eo);
  // 600 text tokens in windows of BOS + 255: 3 windows scoring 255 + 255 + 90.
  EXPECT_EQ(r.n_windows, 3);
  EXPECT_EQ(r.n_scored, 600);
  EXPECT_EQ(r.mean_kl(), 0.0);
  EXPECT_EQ(r.top1_agree_pct(), 100.0);
  EXPECT_EQ(r.ppl(), r.reference_ppl());
  EXPECT_GT(r.ppl(), 2.0);
  EXPECT_LT(r.ppl(), 6.0);
  EXPECT_EQ(r.model.tokens_evaluated, 603);
  EXPECT_GT(r.model.bytes_read, 0u);

  // Alone (no reference) the perplexity is the same number.
  const bench::EvalResult solo = bench::evaluate_text(*a, nullptr, text, eo);
  EXPECT_EQ(solo.ppl(), r.ppl());
  EXPECT_FALSE(solo.has_reference);
}

TEST(PolicyEval, TopK1HasPositiveKlAndReadsLess) {
  REQUIRE_SHARED(kStories);
  REQUIRE_SHARED(kCorpus);
  const auto text = corpus_tokens(300);
  model::ModelConfig cfg = streaming_config();
  cfg.ubatch = 1;
  auto ref = load(shared_path(kStories), cfg);
  cfg.trims.top_k = 1;
  auto trimmed = load(shared_path(kStories), cfg);
  bench::EvalOptions eo;
  eo.ctx = 128;
  eo.bos = 1;
  eo.batch = 32;
  const bench::EvalResult r = bench::evaluate_text(*trimmed, ref.get(), text, eo);
  EXPECT_GT(r.mean_kl(), 0.0);
  EXPECT_LT(r.top1_agree_pct(), 100.0);
  EXPECT_GT(r.top1_agree_pct(), 50.0);  // one expert of two still predicts mostly the same
  EXPECT_TRUE(std::isfinite(r.ppl()));
  EXPECT_EQ(r.model.experts_read * 2, r.reference.experts_read);
}

TEST(PolicyEval, RejectsBadOptions) {
  REQUIRE_SHARED(kStories);
  auto m = load(shared_path(kStories), streaming_config());
  const std::vector<int32_t> text = {400, 401, 402};
  bench::EvalOptions eo;
  eo.ctx = 1;
  EXPECT_THROW(bench::evaluate_text(*m, nullptr, text, eo), Error);
  eo.ctx = 4096;  // beyond the model's 512-position cache
  EXPECT_THROW(bench::evaluate_text(*m, nullptr, text, eo), Error);
  eo.ctx = 16;
  EXPECT_THROW(bench::evaluate_text(*m, nullptr, std::vector<int32_t>{400}, eo), Error);  // nothing to score
}

// ---- CLI -----------------------------------------------------------------------

TEST(PolicyCli, EngineFlagsCarryTrimsAndUbatch) {
  CLI::App app;
  runtime::EngineOptions o;
  cli::add_engine_flags(&app, o);
  app.parse("--moe-top-k 3 --expert-budget 1 --ubatch 64 -m x.gguf", false);
  const model::ModelConfig c = o.to_model_config();
  EXPECT_EQ(c.ubatch, 64);
  EXPECT_EQ(c.trims.top_k, 3);
  EXPECT_EQ(c.trims.expert_budget, 1);
  runtime::EngineOptions bad;
  CLI::App app2;
  cli::add_engine_flags(&app2, bad);
  app2.parse("--ubatch 0 -m x.gguf", false);
  EXPECT_THROW(bad.to_model_config(), Error);
}

TEST(PolicyCli, EvalPrintsTheComparisonLine) {
  REQUIRE_SHARED(kStories);
  REQUIRE_SHARED(kCorpus);
  const std::string cmd = std::string(SLUICE_BINARY) + " eval -m " + shared_path(kStories) + " -f " +
                          shared_path(kCorpus) + " --max-tokens 300 --ctx 128 --moe-top-k 1 --no-odirect --json";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), &pclose);
  ASSERT_TRUE(p);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p.get())) out.append(buf, n);
  ASSERT_EQ(pclose(p.release()), 0) << cmd;
  // stdout is one JSON object and nothing else.
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["tokens_scored"].get<int>(), 300);
  EXPECT_EQ(j["trims"]["top_k"].get<int>(), 1);
  EXPECT_GT(j["kl_mean"].get<double>(), 0.0);
  EXPECT_LT(j["model"]["experts_read_per_token"].get<double>(), j["reference"]["experts_read_per_token"].get<double>());
}

}  // namespace
}  // namespace sluice::test
