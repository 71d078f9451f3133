// --ngram: the prompt-lookup draft source on its own, and through Session's
// verify loop: greedy output identical to decoding without drafts on every
// golden case, and drafts accepted where the text repeats.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "case_name.h"
#include "model_test_support.h"
#include "runtime/ngram_draft.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

using runtime::ngram_draft;
using V = std::vector<int32_t>;

TEST(NgramDraft, ProposesWhatFollowedTheMostRecentEarlierOccurrence) {
  // ... 5 6 [7] ... 5 6 [9 10] ... 5 6: the latest earlier "5 6" was followed by 9 10.
  const V h = {5, 6, 7, 1, 5, 6, 9, 10, 2, 5, 6};
  EXPECT_EQ(ngram_draft(h, 2, 4), (V{9, 10, 2, 5}));
  EXPECT_EQ(ngram_draft(h, 2, 1), (V{9}));
  EXPECT_EQ(ngram_draft(h, 3, 4), V{});              // "2 5 6" occurred nowhere earlier
  EXPECT_EQ(ngram_draft(h, 1, 3), (V{9, 10, 2}));    // the latest earlier 6
}

TEST(NgramDraft, StopsAtTheEndOfTheHistoryAndMayOverlapTheSuffix) {
  // A loop: "3 4 3 4 3": the match "4 3" ending one before the end overlaps the suffix.
  EXPECT_EQ(ngram_draft(V{3, 4, 3, 4, 3}, 2, 8), (V{4, 3}));
  EXPECT_EQ(ngram_draft(V{8, 8}, 1, 5), (V{8}));
}

TEST(NgramDraft, NothingToProposeIsEmpty) {
  EXPECT_EQ(ngram_draft(V{}, 1, 4), V{});
  EXPECT_EQ(ngram_draft(V{1}, 1, 4), V{});
  EXPECT_EQ(ngram_draft(V{1, 2, 3}, 3, 4), V{});  // the suffix is the whole history
  EXPECT_EQ(ngram_draft(V{1, 1, 1}, 0, 4), V{});
  EXPECT_EQ(ngram_draft(V{1, 1, 1}, 1, 0), V{});
  EXPECT_EQ(ngram_draft(V{1, 2, 3, 4}, 1, 4), V{});  // no token repeats
}

struct Generated {
  std::vector<int32_t> ids;
  telemetry::MtpCounters counters;
};

Generated generate(const std::string& path, const std::vector<int32_t>& prompt, int n, int ngram, int draft) {
  model::ModelConfig cfg = golden_config();
  cfg.n_ctx = 1024;
  runtime::Session s = runtime::Session::open(path, cfg);
  runtime::MtpOptions o;
  o.ngram = ngram;
  o.depth = ngram > 0 ? draft : 0;
  s.set_mtp(o);
  runtime::Sampler greedy(runtime::SamplerConfig{});
  Generated g;
  s.generate(prompt, n, greedy, [&](int32_t id) {
    g.ids.push_back(id);
    return true;
  });
  g.counters = s.mtp_counters();
  return g;
}

class NgramGolden : public ::testing::TestWithParam<const char*> {};

// The prompt holds every token of the (512-token) vocabulary once, so a
// one-token lookup always finds the last token and drafts at every step, and
// then quotes the model's own continuation (P, what greedy decoding of P gave,
// P again), so longer lookups find runs too. Greedy output must not move by a
// token whatever is accepted or rejected (recurrent models roll back through
// their checkpoints).
TEST_P(NgramGolden, GreedyOutputIsIdenticalToDecodingWithoutDrafts) {
  const std::string rel = std::string("golden/") + GetParam() + ".gguf";
  REQUIRE_SHARED(rel);
  const std::string path = shared_path(rel);
  const std::vector<int32_t> p = {1, 42, 7, 300, 9};
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 512; ++i) prompt.push_back((i * 97) % 512);  // every id, scattered
  prompt.insert(prompt.end(), p.begin(), p.end());
  const Generated first = generate(path, p, 8, 0, 0);
  prompt.insert(prompt.end(), first.ids.begin(), first.ids.end());
  prompt.insert(prompt.end(), p.begin(), p.end());
  const Generated plain = generate(path, prompt, 16, 0, 0);
  ASSERT_EQ(plain.ids.size(), 16u);
  for (int ngram : {1, 2}) {
    const Generated drafted = generate(path, prompt, 16, ngram, 3);
    EXPECT_EQ(drafted.ids, plain.ids) << "--ngram " << ngram;
    EXPECT_EQ(drafted.counters.ngram, ngram);
    if (ngram == 1) {
      EXPECT_EQ(drafted.counters.plain_steps, 0u) << "every token occurred earlier";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, NgramGolden,
                         ::testing::Values("qwen3moe-f32", "qwen3moe-kquants", "llama-moe-f32", "llama-dense-f16",
                                           "gpt-oss-mxfp4", "glm4moe-f32", "deepseek2-f32", "deepseek2-mtp-f32",
                                           "qwen35moe-f32", "qwen35moe-kquants", "gemma4-f32", "gemma4-split-q8_0",
                                           "glm-dsa-f32"),
                         CaseName{});

// On a trained model and text that quotes itself, drafts are accepted and save
// trunk forwards; the text is the same.
TEST(NgramStories, ACopyHeavyPromptAcceptsDraftsWithTheSameText) {
  const std::string path = shared_path("models/stories-moe-8x-f32.gguf");
  if (!exists(path)) GTEST_SKIP() << path << " not found";
  const auto g = gguf::GgufModel::open(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(g.metadata());
  const std::string story =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. ";
  const std::vector<int32_t> prompt = tok.encode(story + story + "Once upon a time,", true, false);
  const Generated plain = generate(path, prompt, 32, 0, 0);
  const Generated drafted = generate(path, prompt, 32, 3, 4);
  EXPECT_EQ(drafted.ids, plain.ids);
  EXPECT_GT(drafted.counters.accepted, 8u) << "drafted " << drafted.counters.drafted;
  EXPECT_LT(drafted.counters.steps + drafted.counters.plain_steps, 32u) << "accepted drafts save trunk forwards";
}

TEST(NgramDraft, SessionRejectsAnNgramWithoutDrafts) {
  const std::string path = shared_path("golden/qwen3moe-f32.gguf");
  if (!exists(path)) GTEST_SKIP() << path << " not found";
  runtime::Session s = runtime::Session::open(path, golden_config());
  runtime::MtpOptions o;
  o.ngram = 2;
  EXPECT_THROW(s.set_mtp(o), Error);
  o.depth = 2;
  EXPECT_NO_THROW(s.set_mtp(o));  // no NextN head needed
}

// `sluice run --ngram`: the same text as without, the draft line in the
// summary, and the flag errors.
TEST(NgramCli, RunPrintsTheSameTextAndItsDraftLine) {
  const std::string path = shared_path("models/stories-moe-8x-f32.gguf");
  if (!exists(path)) GTEST_SKIP() << path << " not found";
  const std::string p = "'Lily saw a ball. Lily saw a ball. Lily saw a ball. Lily'";
  const CliResult plain = run_sluice("run -m " + path + " -p " + p + " -n 24 --temp 0 -v", "2>/dev/null");
  const CliResult drafted =
      run_sluice("run -m " + path + " -p " + p + " -n 24 --temp 0 -v --ngram 2 --ngram-draft 3", "2>/dev/null");
  ASSERT_EQ(plain.status, 0) << plain.out;
  ASSERT_EQ(drafted.status, 0) << drafted.out;
  EXPECT_EQ(drafted.out, plain.out);
  EXPECT_FALSE(plain.out.empty());
  const CliResult summary = run_sluice("run -m " + path + " -p " + p + " -n 24 --temp 0 -v --ngram 2", "2>&1 >/dev/null");
  EXPECT_NE(summary.out.find("sluice: ngram 2 (up to 4 drafts): "), std::string::npos) << summary.out;

  const CliResult both = run_sluice("run -m " + path + " -p x --ngram 2 --mtp 1");
  EXPECT_NE(both.status, 0);
  EXPECT_NE(both.out.find("--ngram: choose one draft source"), std::string::npos) << both.out;
  const CliResult zero = run_sluice("run -m " + path + " -p x --ngram 2 --ngram-draft 0");
  EXPECT_NE(zero.status, 0);
  EXPECT_NE(zero.out.find("--ngram-draft: expected 1..16"), std::string::npos) << zero.out;
}

}  // namespace
}  // namespace sluice::test
