// MTP: the NextN head against llama.cpp (shared/golden/deepseek2-mtp-f32),
// speculative decoding's bookkeeping on a scripted model, greedy identity on
// real models, and speculative sampling's acceptance rule.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "model_test_support.h"
#include "mtp_golden.h"
#include "runtime/mtp_trace.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tools/synth.h"
#include "util/error.h"

namespace sluice::test {
// Named, not the file namespace: expect_mtp_matches_llama_cpp below is outside it.
namespace mtp_rows {

// ---- the head against the reference ----------------------------------------

struct RowCheck {
  double mean_abs = 0, worst = 0, frac_over = 0;
  int argmax_same = 0, rows = 0;
};

RowCheck compare_rows(const std::vector<float>& ref, const std::vector<float>& got, size_t width, double row_limit) {
  RowCheck c;
  c.rows = static_cast<int>(ref.size() / width);
  int over = 0;
  for (int r = 0; r < c.rows; ++r) {
    double row_max = 0;
    size_t ra = 0, ga = 0;
    for (size_t v = 0; v < width; ++v) {
      const size_t i = static_cast<size_t>(r) * width + v;
      const double d = std::fabs(static_cast<double>(ref[i]) - got[i]);
      c.mean_abs += d;
      row_max = std::max(row_max, d);
      if (ref[i] > ref[r * width + ra]) ra = v;
      if (got[i] > got[r * width + ga]) ga = v;
    }
    c.worst = std::max(c.worst, row_max);
    over += row_max > row_limit;
    c.argmax_same += ra == ga;
  }
  c.mean_abs /= static_cast<double>(ref.size());
  c.frac_over = static_cast<double>(over) / c.rows;
  return c;
}

}  // namespace mtp_rows

// Declared in mtp_golden.h: the head of `gguf` against the case `c`, whose
// MTP files (c["mtp"]["files"]) lie in `files_dir`.
void expect_mtp_matches_llama_cpp(const nlohmann::json& c, const std::string& gguf, const std::string& files_dir) {
  const auto tokens = c["tokens"].get<std::vector<int32_t>>();
  const auto& mtp = c["mtp"];
  const int K = mtp["chain"]["k"].get<int>();
  auto cfg = golden_config();
  cfg.mtp = true;
  auto m = load(gguf, cfg);
  ASSERT_TRUE(m->has_mtp());
  const runtime::MtpTrace t = runtime::mtp_trace(*m, tokens, K);

  auto file = [&](const char* key) { return read_f32_file(files_dir + "/" + mtp["files"][key].get<std::string>()); };
  // The head's inputs and its normalised output: F32 all the way, so tight.
  const mtp_rows::RowCheck h = mtp_rows::compare_rows(file("h_nextn"), t.hidden, t.width, 1e-4);
  EXPECT_LT(h.worst, 1e-4);
  // mtp_h holds g of the rows at positions 0..n-2 (its row 0 is the row
  // (t_0, zero hidden); shared/golden's README says i+1, its data says i, and
  // tests/golden's files follow the data): compare the positions both have, 1..n-2.
  std::vector<float> ref_g = file("mtp_h");
  ref_g.erase(ref_g.begin(), ref_g.begin() + t.width);
  const std::vector<float> our_g(t.draft_g.begin(), t.draft_g.end() - t.width);
  const mtp_rows::RowCheck g = mtp_rows::compare_rows(ref_g, our_g, t.width, 1e-4);
  EXPECT_LT(g.worst, 1e-4);
  // Draft logits and chains under the case's pass rule.
  for (const auto& [key, got, tol] :
       {std::tuple{"mtp_logits", &t.draft_logits, mtp["tolerance"]}, std::tuple{"mtp_chain", &t.chain, mtp["chain"]["tolerance"]}}) {
    const mtp_rows::RowCheck r = mtp_rows::compare_rows(file(key), *got, t.n_vocab, tol["position_max_abs_diff"].get<double>());
    std::printf("[mtp] %-10s rows %d  mean|d| %.3g  worst %.3g  argmax %d/%d\n", key, r.rows, r.mean_abs, r.worst,
                r.argmax_same, r.rows);
    EXPECT_LE(r.mean_abs, tol["mean_abs_diff"].get<double>()) << key;
    EXPECT_LE(r.frac_over, tol["max_fraction_positions_exceeding"].get<double>() + 1e-12) << key;
    EXPECT_GE(static_cast<double>(r.argmax_same) / r.rows, tol["argmax_agreement_min"].get<double>()) << key;
  }
  // The chain fed its own argmax: the reference's drafts wherever they are clear.
  const auto drafts = mtp["chain"]["draft_tokens"];
  const auto margins = mtp["chain"]["top1_top2_margins"];
  for (size_t a = 0; a < drafts.size(); ++a) {
    for (int k = 0; k < K; ++k) {
      if (margins[a][k].get<double>() >= 1e-3) {
        EXPECT_EQ(t.chain_tokens[a * K + k], drafts[a][k].get<int32_t>()) << "anchor " << a + 1 << " step " << k + 1;
      }
    }
  }
}

namespace SLUICE_TEST_FILE {

const char* kMtpCase = "golden/deepseek2-mtp-f32";

class MtpGoldenCase : public ::testing::TestWithParam<std::string> {};

TEST_P(MtpGoldenCase, DraftLogitsChainsAndHiddenStatesMatchLlamaCpp) {
  const std::string kase = GetParam();
  REQUIRE_SHARED(kase + ".json");
  std::ifstream jf(shared_path(kase + ".json"));
  expect_mtp_matches_llama_cpp(nlohmann::json::parse(jf), shared_path(kase + ".gguf"), shared_path("golden"));
}

// deepseek2: MLA trunk, MoE head with its own embedding and lm head;
// qwen35moe: hybrid DeltaNet trunk, gated-attention head on the trunk's
// token_embd and output.
INSTANTIATE_TEST_SUITE_P(Cases, MtpGoldenCase,
                         ::testing::Values("golden/deepseek2-mtp-f32", "golden/qwen35moe-mtp-f32"),
                         [](const auto& info) {
                           std::string s = info.param.substr(info.param.find('/') + 1);
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

// Loading the head changes nothing in the trunk (its tensors are only claimed).
TEST(MtpGolden, TrunkLogitsAreBitIdenticalWithTheHeadLoaded) {
  REQUIRE_SHARED(std::string(kMtpCase) + ".gguf");
  const std::string path = shared_path(std::string(kMtpCase) + ".gguf");
  const std::vector<int32_t> tokens = {1, 17, 300, 42, 99, 7};
  auto plain = load(path, golden_config());
  auto cfg = golden_config();
  cfg.mtp = true;
  auto with = load(path, cfg);
  const auto a = eval_all(*plain, tokens);
  const auto b = eval_all(*with, tokens);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(MtpGolden, AskingForMtpWithoutANextnBlockIsAnError) {
  REQUIRE_SHARED("golden/deepseek2-f32.gguf");
  auto cfg = golden_config();
  cfg.mtp = true;
  const std::string path = shared_path("golden/deepseek2-f32.gguf");
  try {
    load(path, cfg);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": --mtp: this deepseek2 file has no NextN/MTP block (nextn_predict_layers is 0 or absent)");
  }
}

// ---- speculative decoding's bookkeeping on a scripted model ------------------

// A model whose next token is a fixed function of the current one, and whose
// NextN head guesses the token after next right except after some tokens.
// It checks every call against the contract the session must keep: eval
// only appends (rollback is an explicit truncate), and each true head row
// pairs token t_q with h_{q-1}. With `recurrent`, truncate behaves as a
// recurrent model's: it falls back to the newest checkpoint at or before n
// (0 without one), and counts the positions it lost, which the session must
// re-evaluate.
class ScriptedModel final : public model::Model {
 public:
  static constexpr int kVocab = 16;
  static int32_t next(int32_t t) { return (t * 5 + 3) % kVocab; }
  static bool head_wrong_after(int32_t t) { return t % 4 == 0; }

  explicit ScriptedModel(bool recurrent = false) : recurrent_(recurrent) {
    hp_.n_vocab = kVocab;
    hp_.n_embd = 2;
    hp_.n_layer = 1;
  }
  const model::HParams& hparams() const override { return hp_; }
  int n_ctx() const override { return 256; }
  bool has_mtp() const override { return true; }
  void reset() override { trunk_.clear(), head_.clear(), checkpoints_.clear(); }
  int n_past() const override { return static_cast<int>(trunk_.size()); }
  int truncate(int n) override {
    if (n < 0 || n > n_past()) throw Error("trunk: truncate past the state");
    int r = n;
    if (recurrent_ && n < n_past()) {
      r = 0;
      for (int c : checkpoints_)
        if (c <= n) r = std::max(r, c);
      lost += n - r;
    }
    std::erase_if(checkpoints_, [r](int c) { return c > r; });
    trunk_.resize(static_cast<size_t>(r));
    return r;
  }
  void checkpoint() override { checkpoints_.push_back(n_past()); }
  int mtp_n_past() const override { return static_cast<int>(head_.size()); }
  void mtp_truncate(int n) override {
    if (n < 0 || n > mtp_n_past()) throw Error("head: truncate past its rows");
    head_.resize(static_cast<size_t>(n));
  }
  model::ModelStats stats() const override { return {}; }

  void eval(std::span<const int32_t> tokens, int pos0, float* logits) override {
    std::vector<float> h(tokens.size() * 2);
    eval_hidden(tokens, pos0, logits, h.data(), true);
  }
  void eval_last(std::span<const int32_t> tokens, int pos0, float* logits) override {
    std::vector<float> all(tokens.size() * kVocab), h(tokens.size() * 2);
    eval_hidden(tokens, pos0, all.data(), h.data(), true);
    std::copy_n(&all[(tokens.size() - 1) * kVocab], kVocab, logits);
  }
  void eval_hidden(std::span<const int32_t> tokens, int pos0, float* logits, float* hidden, bool all_rows) override {
    if (pos0 != static_cast<int>(trunk_.size())) throw Error("trunk: eval not at n_past (truncate first)");
    for (size_t i = 0; i < tokens.size(); ++i) {
      trunk_.push_back(tokens[i]);
      hidden[i * 2] = static_cast<float>(tokens[i]);  // h_p encodes t_p
      hidden[i * 2 + 1] = static_cast<float>(pos0 + i);
      const bool row = all_rows || i + 1 == tokens.size();
      if (row) one_hot(next(tokens[i]), logits + (all_rows ? i : 0) * kVocab);
    }
    ++trunk_forwards;
  }
  void mtp_eval(std::span<const int32_t> tokens, const float* hidden, int pos0, float* logits, float* g,
                bool all_rows) override {
    if (pos0 != static_cast<int>(head_.size())) throw Error("head: eval not at mtp_n_past (mtp_truncate first)");
    for (size_t i = 0; i < tokens.size(); ++i) {
      const int q = pos0 + static_cast<int>(i);
      // A true row (t_q, h_{q-1}) must carry the trunk's state of position q-1.
      if (q < static_cast<int>(trunk_.size()) && trunk_[q] == tokens[i] && hidden[i * 2 + 1] >= 0 &&
          static_cast<int>(hidden[i * 2 + 1]) == q - 1 && static_cast<int32_t>(hidden[i * 2]) != trunk_[q - 1])
        ADD_FAILURE() << "head row " << q << " pairs token " << tokens[i] << " with a wrong hidden state";
      if (q == 0 && (hidden[0] != 0 || hidden[1] != 0)) ADD_FAILURE() << "row 0 must see a zero hidden state";
      head_.push_back(tokens[i]);
      const int32_t guess = head_wrong_after(tokens[i]) ? (next(tokens[i]) + 1) % kVocab : next(tokens[i]);
      if (all_rows || i + 1 == tokens.size()) one_hot(guess, logits + (all_rows ? i : 0) * kVocab);
      g[i * 2] = static_cast<float>(guess);  // a chained step's "hidden": the guess
      g[i * 2 + 1] = -1;                     // not a trunk state
    }
  }
  int trunk_forwards = 0;
  uint64_t lost = 0;  // positions truncate fell back over (recurrent)

 private:
  static void one_hot(int32_t id, float* row) {
    for (int v = 0; v < kVocab; ++v) row[v] = v == id ? 5.0f : 0.0f;
  }
  model::HParams hp_;
  std::vector<int32_t> trunk_, head_;
  bool recurrent_ = false;
  std::vector<int> checkpoints_;
};

// constrain_first: the first call's sampler has a (pass-all) token
// constraint, which generates without drafts; the second call drafts again.
std::vector<int32_t> generate_scripted(int depth, int n, telemetry::MtpCounters* counters = nullptr,
                                       int* forwards = nullptr, bool constrain_first = false,
                                       bool recurrent = false, uint64_t* lost = nullptr,
                                       uint64_t* recomputed = nullptr) {
  auto owned = std::make_unique<ScriptedModel>(recurrent);
  ScriptedModel* m = owned.get();
  runtime::Session s(nullptr, std::move(owned));
  runtime::MtpOptions o;
  o.depth = depth;
  s.set_mtp(o);
  runtime::Sampler greedy(runtime::SamplerConfig{});
  std::vector<int32_t> out;
  const std::vector<int32_t> prompt = {1, 2, 3};
  runtime::Sampler constrained(runtime::SamplerConfig{});
  constrained.set_constraint([](int32_t) { return true; });
  s.generate(prompt, n, constrain_first ? constrained : greedy, [&](int32_t id) {
    out.push_back(id);
    return true;
  });
  if (constrain_first && s.mtp_counters().drafted != 0) ADD_FAILURE() << "a constrained sampler must not draft";
  // A second call continues where the first stopped.
  s.generate(std::vector<int32_t>{}, n, greedy, [&](int32_t id) {
    out.push_back(id);
    return true;
  });
  if (counters) *counters = s.mtp_counters();
  if (forwards) *forwards = m->trunk_forwards;
  if (lost) *lost = m->lost;
  if (recomputed) *recomputed = s.recomputed_tokens();
  if (s.recomputed_tokens() != s.summary().recomputed_tokens) ADD_FAILURE() << "the summary must report it";
  return out;
}

TEST(MtpDecoding, GreedyOutputIsIdenticalAndDraftsAreAcceptedWhereRight) {
  const std::vector<int32_t> plain = generate_scripted(0, 40);
  ASSERT_EQ(plain.size(), 80u);
  int32_t t = 3;  // the script: each token follows from the one before
  for (int32_t id : plain) EXPECT_EQ(id, t = ScriptedModel::next(t));
  int plain_forwards = 0;
  generate_scripted(0, 40, nullptr, &plain_forwards);
  for (int depth : {1, 2, 3, 5}) {
    telemetry::MtpCounters c;
    int forwards = 0;
    EXPECT_EQ(generate_scripted(depth, 40, &c, &forwards), plain) << "depth " << depth;
    EXPECT_GT(c.accepted, 0u) << depth;
    EXPECT_LT(c.accepted, c.drafted) << depth;  // the head is wrong after every 4th token value
    EXPECT_LT(forwards, plain_forwards) << depth << ": accepted drafts save trunk forwards";
    uint64_t sum = 0;
    for (size_t i = 0; i < c.accepted_at.size(); ++i) {
      EXPECT_LE(c.accepted_at[i], c.drafted_at[i]);
      if (i > 0) {
        EXPECT_LE(c.accepted_at[i], c.accepted_at[i - 1]);  // accepted only after the one before
      }
      sum += c.accepted_at[i];
    }
    EXPECT_EQ(sum, c.accepted);
  }
}

// A recurrent model cannot drop rejected verify rows exactly: truncate falls
// back to the checkpoint the session took before the verify batch, and the
// session re-evaluates the accepted tokens from its history. The text stays
// the same and every position lost is counted as recomputed.
TEST(MtpDecoding, RejectedDraftsOnARecurrentModelAreRecomputedFromTheCheckpoint) {
  const std::vector<int32_t> plain = generate_scripted(0, 40);
  for (int depth : {1, 3}) {
    telemetry::MtpCounters c;
    uint64_t lost = 0, recomputed = 0;
    EXPECT_EQ(generate_scripted(depth, 40, &c, nullptr, false, true, &lost, &recomputed), plain) << depth;
    EXPECT_LT(c.accepted, c.drafted) << depth;  // there were rejections ...
    EXPECT_GT(lost, 0u) << depth;               // ... so truncate fell back ...
    EXPECT_EQ(recomputed, lost) << depth;       // ... and exactly that much was re-evaluated
  }
  uint64_t lost = 0, recomputed = 0;
  EXPECT_EQ(generate_scripted(0, 40, nullptr, nullptr, false, true, &lost, &recomputed), plain);
  EXPECT_EQ(lost, 0u);  // plain decoding never rolls back
  EXPECT_EQ(recomputed, 0u);
}

TEST(MtpDecoding, AConstrainedSamplerGeneratesWithoutDraftsAndDraftingResumesAfter) {
  const std::vector<int32_t> plain = generate_scripted(0, 20);
  telemetry::MtpCounters c;
  EXPECT_EQ(generate_scripted(3, 20, &c, nullptr, true), plain);
  EXPECT_GT(c.drafted, 0u);  // the second, unconstrained call drafted
  EXPECT_GT(c.accepted, 0u);
}

TEST(MtpDecoding, StoppingInsideAcceptedDraftsLeavesAConsistentSession) {
  // n = 1..7 stops at every offset inside a step; each continuation must still match.
  for (int n = 1; n <= 7; ++n) {
    const std::vector<int32_t> a = generate_scripted(0, n), b = generate_scripted(3, n);
    EXPECT_EQ(a, b) << "n " << n;
  }
}

// -n -1 runs to the end of the context and stops cleanly there, with and without drafts.
TEST(MtpDecoding, UnlimitedGenerationStopsAtAFullContextWithTheSameText) {
  std::vector<std::vector<int32_t>> outs;
  for (int depth : {0, 3}) {
    runtime::Session s(nullptr, std::make_unique<ScriptedModel>());
    runtime::MtpOptions o;
    o.depth = depth;
    s.set_mtp(o);
    runtime::Sampler greedy(runtime::SamplerConfig{});
    std::vector<int32_t> out;
    const runtime::GenerationStats st = s.generate(std::vector<int32_t>{1, 2, 3}, -1, greedy, [&](int32_t id) {
      out.push_back(id);
      return true;
    });
    EXPECT_TRUE(st.context_full) << depth;
    EXPECT_EQ(s.tokens().size(), 256u) << depth;  // every position used, the last token pending
    outs.push_back(out);
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0].size(), 256u - 3u + 1u);
}

// ---- greedy identity on real models ------------------------------------------

std::string generate_text(const std::string& path, int depth, uint64_t cache_bytes) {
  auto cfg = golden_config();
  cfg.mtp = depth > 0;
  cfg.cache_bytes = cache_bytes;
  runtime::Session s = runtime::Session::open(path, cfg);
  runtime::MtpOptions o;
  o.depth = depth;
  s.set_mtp(o);
  runtime::Sampler greedy(runtime::SamplerConfig{});
  std::string ids;
  const std::vector<int32_t> prompt = {1, 42, 7, 300, 9};
  s.generate(prompt, 32, greedy, [&](int32_t id) {
    ids += std::to_string(id) + " ";
    return true;
  });
  return ids;
}

TEST(MtpDecoding, GreedyIsByteIdenticalOnTheGoldenMtpModelCacheOnAndOff) {
  REQUIRE_SHARED(std::string(kMtpCase) + ".gguf");
  const std::string path = shared_path(std::string(kMtpCase) + ".gguf");
  const std::string want = generate_text(path, 0, 0);
  for (uint64_t cache : {uint64_t{0}, uint64_t{64} << 20})
    for (int depth : {1, 2, 3}) EXPECT_EQ(generate_text(path, depth, cache), want) << depth << " cache " << cache;
}

// glm4moe's NextN block (no own embed_tokens / shared_head_head: the trunk's
// stand in). llama.cpp has no glm4moe MTP graph, so lossless greedy output is
// the check.
TEST(MtpDecoding, GreedyIsByteIdenticalOnGlm4moeWithItsNextnBlock) {
  REQUIRE_SHARED("golden/glm4moe-f32.gguf");
  const std::string path = shared_path("golden/glm4moe-f32.gguf");
  const std::string want = generate_text(path, 0, 0);
  for (int depth : {1, 3}) EXPECT_EQ(generate_text(path, depth, 0), want) << depth;
}

// qwen35moe: rejected drafts roll the DeltaNet layers back through the
// pre-verify checkpoint (and a recompute of the accepted rows), so the text is
// the same as without drafts; the recomputation is counted.
TEST(MtpDecoding, GreedyIsByteIdenticalOnQwen35moeWithItsRecurrentLayers) {
  REQUIRE_SHARED("golden/qwen35moe-mtp-f32.gguf");
  const std::string path = shared_path("golden/qwen35moe-mtp-f32.gguf");
  const std::string want = generate_text(path, 0, 0);
  for (int depth : {1, 2, 3}) EXPECT_EQ(generate_text(path, depth, 0), want) << depth;
}

TEST(MtpDecoding, GreedyIsByteIdenticalOnASynthesizedDeepseek2WithANextnBlock) {
  TempDir d;
  tools::SynthConfig sc = tools::synth_preset("tiny", "deepseek2");
  sc.n_nextn = 1;
  const std::string path = d.file("ds2-nextn.gguf");
  tools::synth_model(sc, path, 1);
  const std::string want = generate_text(path, 0, 0);
  for (uint64_t cache : {uint64_t{0}, uint64_t{32} << 20})
    for (int depth : {1, 2, 3}) EXPECT_EQ(generate_text(path, depth, cache), want) << depth << " cache " << cache;
}

// ---- speculative sampling keeps the target distribution -----------------------

TEST(MtpSampling, AcceptOrResampleReproducesTheTargetDistribution) {
  runtime::SamplerConfig sc;
  sc.temperature = 1.0f;
  sc.top_k = 0;
  sc.top_p = 1.0f;
  sc.min_p = 0.0f;
  sc.seed = 7;
  runtime::Sampler s(sc);
  // Target p and a quite different draft q over 4 tokens.
  const std::vector<float> target = {2.0f, 1.0f, 0.0f, -1.0f}, draft = {-1.0f, 0.5f, 2.0f, 0.0f};
  const runtime::TokenDist p = s.distribution(target, {}), q = s.distribution(draft, {});
  std::map<int32_t, int> counts;
  constexpr int kDraws = 200000;
  int accepted = 0;
  for (int i = 0; i < kDraws; ++i) {
    const int32_t x = s.draw(q);
    bool ok = false;
    ++counts[s.accept_or_resample(p, q, x, ok)];
    accepted += ok;
  }
  for (int32_t id = 0; id < 4; ++id)
    EXPECT_NEAR(static_cast<double>(counts[id]) / kDraws, p.prob(id), 0.005) << "token " << id;
  // The acceptance rate of speculative sampling is sum_x min(p(x), q(x)).
  double overlap = 0;
  for (int32_t id = 0; id < 4; ++id) overlap += std::min(p.prob(id), q.prob(id));
  EXPECT_NEAR(static_cast<double>(accepted) / kDraws, overlap, 0.005);
}

}  // namespace
}  // namespace sluice::test
