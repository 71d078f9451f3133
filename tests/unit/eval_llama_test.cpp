// `sluice eval --ppl-mode llama` against llama-perplexity (llama.cpp b10573)
// on the bundled trained model, `-c` as the window, and base log-probabilities
// files: written by sluice and read back, and (tests/reference/llama-perplexity/)
// written by llama-perplexity and read by sluice.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/kld_base_file.h"
#include "test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

const char* const kStories = "models/stories-moe-8x-f32.gguf";
const char* const kCorpus = "models/corpus_eval.txt";

#define REQUIRE_STORIES()                                                                       \
  if (!shared_has(kStories) || !shared_has(kCorpus))                                            \
  GTEST_SKIP() << "needs ../shared/" << kStories << " and " << kCorpus << " (reference data absent)"

// The first `bytes` of the held-out corpus, as `head -c` gives them.
std::string corpus_prefix(const TempDir& d, size_t bytes) {
  const std::string path = d.file("corpus_prefix.txt");
  const std::string all = file_bytes(shared_path(kCorpus));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(all.data(), 1, std::min(bytes, all.size()), f);
  std::fclose(f);
  return path;
}

struct CliRun {
  int rc = -1;
  std::string out, err;
};
CliRun sluice(const std::string& args) {
  TempDir d;
  CliRun r;
  r.out = run_cmd(std::string(SLUICE_BINARY) + " " + args + " 2>" + d.file("err"), &r.rc);
  r.err = file_bytes(d.file("err"));
  return r;
}

nlohmann::json json_of(const CliRun& r) {
  EXPECT_EQ(r.rc, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

// llama-perplexity -m stories-moe-8x-f32.gguf -f <first 20,000 bytes of corpus_eval.txt> -c 128
// (llama.cpp b10573, CPU): "Final estimate: PPL = 3.7276", 73 chunks of 128 tokens, 63 scored
// each (tests/reference/llama-perplexity/README.md: the commands).
constexpr double kLlamaPplC128 = 3.7276;

TEST(EvalLlama, PerplexityAgreesWithLlamaPerplexity) {
  REQUIRE_STORIES();
  TempDir d;
  const std::string text = corpus_prefix(d, 20000);
  const nlohmann::json j =
      json_of(sluice("eval -m " + shared_path(kStories) + " -f " + text + " -c 128 --ppl-mode llama --json"));
  EXPECT_EQ(j["ppl_mode"], "llama");
  EXPECT_EQ(j["ctx"], 128);
  EXPECT_EQ(j["windows"], 73);
  EXPECT_EQ(j["tokens_scored"], 73 * 63);
  const double ppl = j["model"]["ppl"].get<double>();
  EXPECT_NEAR(ppl / kLlamaPplC128, 1.0, 0.005) << "sluice " << ppl << " vs llama-perplexity " << kLlamaPplC128;
}

TEST(EvalLlama, DashCIsTheWindowAndAWindowPastItIsAnError) {
  REQUIRE_STORIES();
  TempDir d;
  const std::string text = corpus_prefix(d, 4000);
  const std::string base = "eval -m " + shared_path(kStories) + " -f " + text;
  const nlohmann::json j = json_of(sluice(base + " -c 128 --json"));
  EXPECT_EQ(j["ctx"], 128);  // not the default 512
  const CliRun bad = sluice(base + " -c 128 --ctx 256");
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("--ctx 256 is larger than the context -c 128"), std::string::npos) << bad.err;
  const CliRun short_text = sluice("eval -m " + shared_path(kStories) + " -f " + corpus_prefix(d, 300) +
                                " -c 128 --ppl-mode llama");
  EXPECT_EQ(short_text.rc, 1);
  EXPECT_NE(short_text.err.find("needs at least 256 tokens for chunks of 128"), std::string::npos) << short_text.err;
}

// sluice writes a base file; the same model read against it scores KL ~ 0 and
// 100% same top token; a trimmed model (--moe-top-k 1) scores a positive KL.
TEST(EvalLlama, BaseFileWrittenThenReadBack) {
  REQUIRE_STORIES();
  TempDir d;
  const std::string text = corpus_prefix(d, 6000);
  const std::string kld = d.file("base.kld");
  const std::string m = " -m " + shared_path(kStories);
  const nlohmann::json w = json_of(sluice("eval" + m + " -f " + text + " -c 64 --kl-divergence-base " + kld + " --json"));
  EXPECT_EQ(w["ppl_mode"], "llama");  // the base file implies llama's chunks
  const bench::KldBaseReader rd(kld);
  EXPECT_EQ(rd.header().n_ctx, 64);
  EXPECT_EQ(rd.header().n_vocab, 512);
  EXPECT_EQ(rd.header().n_chunk, w["windows"].get<int>());
  EXPECT_EQ(rd.tokens().front(), 1);  // BOS first, as llama-perplexity tokenizes

  const nlohmann::json same = json_of(sluice("eval" + m + " --kl-divergence-base " + kld + " --kl-divergence --json"));
  const nlohmann::json& k = same["kl_divergence_base"];
  EXPECT_EQ(k["rows"], w["tokens_scored"]);
  EXPECT_LT(k["kld_mean"].get<double>(), 1e-5);
  EXPECT_EQ(k["same_top_pct"].get<double>(), 100.0);
  EXPECT_NEAR(k["ppl"].get<double>(), w["model"]["ppl"].get<double>(), 1e-4);
  // The base file stores log-probabilities in 16 bits: its PPL is the model's within 0.1%.
  EXPECT_NEAR(k["ppl_base"].get<double>() / k["ppl"].get<double>(), 1.0, 1e-3);

  const nlohmann::json trimmed =
      json_of(sluice("eval" + m + " --moe-top-k 1 --kl-divergence-base " + kld + " --kl-divergence --json"));
  EXPECT_GT(trimmed["kl_divergence_base"]["kld_mean"].get<double>(), 1e-3);
  EXPECT_LT(trimmed["kl_divergence_base"]["same_top_pct"].get<double>(), 100.0);

  // The text report is llama-perplexity's.
  const CliRun table = sluice("eval" + m + " --kl-divergence-base " + kld + " --kl-divergence");
  EXPECT_NE(table.out.find("====== KL divergence statistics ======"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("Same top p: 100.000"), std::string::npos) << table.out;

  const CliRun wrong_ctx = sluice("eval" + m + " --kl-divergence-base " + kld + " --kl-divergence -c 128");
  EXPECT_EQ(wrong_ctx.rc, 1);
  EXPECT_NE(wrong_ctx.err.find("its chunks are 64 tokens, not 128"), std::string::npos) << wrong_ctx.err;
  const CliRun no_file = sluice("eval" + m + " --kl-divergence");
  EXPECT_EQ(no_file.rc, 1);
  EXPECT_NE(no_file.err.find("--kl-divergence-base FILE"), std::string::npos) << no_file.err;
}

// A base file llama-perplexity wrote (tests/reference/llama-perplexity/README.md)
// read by sluice: the same model scores KL ~ 0 and llama's PPL; sluice writing
// a base file for the same text and chunks gives the same header and tokens.
TEST(EvalLlama, ReadsABaseFileLlamaPerplexityWrote) {
  REQUIRE_STORIES();
  const std::string llama_kld =
      source_path("tests/reference/llama-perplexity/stories-moe-8x-f32.c64x4.kld");
  const nlohmann::json j = json_of(
      sluice("eval -m " + shared_path(kStories) + " --kl-divergence-base " + llama_kld + " --kl-divergence --json"));
  const nlohmann::json& k = j["kl_divergence_base"];
  EXPECT_EQ(k["rows"], 4 * 31);
  EXPECT_EQ(k["same_top_pct"].get<double>(), 100.0);
  EXPECT_LT(k["kld_mean"].get<double>(), 1e-5);
  EXPECT_NEAR(k["ppl"].get<double>() / 4.1438, 1.0, 0.005);  // llama-perplexity's Final estimate

  TempDir d;
  const std::string ours = d.file("ours.kld");
  json_of(sluice("eval -m " + shared_path(kStories) + " -f " + corpus_prefix(d, 6000) +
                 " -c 64 --chunks 4 --kl-divergence-base " + ours + " --json"));
  const std::string a = file_bytes(ours), b = file_bytes(llama_kld);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a.substr(0, 20 + 4 * 4 * 64), b.substr(0, 20 + 4 * 4 * 64));  // header and the 256 tokens
}

}  // namespace
}  // namespace sluice::test

// This file's macros end with it (tests/CMakeLists.txt: unity build).
#undef REQUIRE_STORIES
