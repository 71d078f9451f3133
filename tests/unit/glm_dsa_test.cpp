// glm-dsa (MLA + the DSA lightning indexer) against llama.cpp
// (shared/golden/glm-dsa-*): every position's selected keys equal the ones
// llama.cpp selected (NAME.json sparse_selection), in one call and token by
// token; the logits pass the golden rule token by token as well; and the
// selection is part of the state like any KV row: threads, micro-batches and
// rollback change no bit (48 tokens, so from position 16 on the selection is
// a strict subset of the visible keys).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "model/transformer.h"
#include "golden_rule.h"
#include "model_test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

struct Case {
  nlohmann::json json;
  std::string gguf;
  std::vector<int32_t> tokens;
};

Case load_case(const std::string& name) {
  Case c;
  std::ifstream jf(shared_path("golden/" + name + ".json"));
  c.json = nlohmann::json::parse(jf);
  c.gguf = shared_path("golden/" + c.json["gguf"].get<std::string>());
  c.tokens = c.json["tokens"].get<std::vector<int32_t>>();
  return c;
}

class GlmDsaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!exists(shared_path("golden/" + GetParam() + ".json"))) GTEST_SKIP() << GetParam() << " not found";
    c_ = load_case(GetParam());
  }
  std::unique_ptr<model::Model> model(int ubatch, int threads = 2) const {
    auto cfg = golden_config();
    cfg.ubatch = ubatch;
    cfg.threads = threads;
    return load(c_.gguf, cfg);
  }
  // Every selection of every Full layer: layer -> position -> keys.
  using Selections = std::map<int, std::map<int, std::vector<int32_t>>>;
  static void observe(model::Model& m, Selections& out) {
    auto* t = dynamic_cast<model::Transformer*>(&m);
    ASSERT_NE(t, nullptr);
    t->set_dsa_observer([&out](int layer, int pos, std::span<const int32_t> keys) {
      out[layer][pos] = std::vector<int32_t>(keys.begin(), keys.end());
    });
  }
  void expect_llama_cpp_selection(const Selections& got, const std::string& what) const {
    const auto& layers = c_.json["sparse_selection"]["layers"];
    ASSERT_EQ(got.size(), layers.size()) << what << ": full indexer layers";
    for (const auto& [name, l] : layers.items()) {
      const int layer = std::stoi(name.substr(4));  // "blk.N"
      const auto want = l["selected"].get<std::vector<std::vector<int32_t>>>();
      ASSERT_TRUE(got.count(layer)) << what << ": " << name;
      const auto& g = got.at(layer);
      ASSERT_EQ(g.size(), want.size()) << what << ": " << name;
      for (size_t p = 0; p < want.size(); ++p)
        EXPECT_EQ(g.at(static_cast<int>(p)), want[p]) << what << ": " << name << " position " << p;
    }
  }
  Case c_;
};

TEST_P(GlmDsaTest, SelectionEqualsLlamaCppInPrefillAndDecode) {
  for (int ubatch : {512, 1}) {
    auto m = model(ubatch);
    Selections got;
    observe(*m, got);
    eval_all(*m, c_.tokens);
    expect_llama_cpp_selection(got, "ubatch " + std::to_string(ubatch));
  }
}

// The golden rule (check_golden.py 1-3) token by token, and bit-identical to
// the one-call logits (GoldenTest checks those in prefill).
TEST_P(GlmDsaTest, TokenByTokenPassesTheGoldenRule) {
  const auto ref = read_f32_file(shared_path("golden/" + c_.json["logits_file"].get<std::string>()));
  auto m = model(1);
  const size_t nv = m->hparams().n_vocab, n = c_.tokens.size();
  std::vector<float> got(n * nv);
  for (size_t i = 0; i < n; ++i) m->eval(std::span(c_.tokens).subspan(i, 1), static_cast<int>(i), &got[i * nv]);
  ASSERT_EQ(ref.size(), got.size());
  const auto& tol = c_.json["tolerance"];
  const GoldenResult r = compare(ref, got, static_cast<int>(n), static_cast<int>(nv),
                                 tol["position_max_abs_diff"].get<double>());
  std::printf("[golden] %-20s token by token: mean|d|/std %.3g  over %.3f  argmax %.3f\n", GetParam().c_str(),
              r.mean_abs / r.std, r.frac_over, r.argmax_agree);
  EXPECT_EQ(golden_violations(r, tol), "");
  auto whole = model(512);
  EXPECT_TRUE(same_bits(eval_all(*whole, c_.tokens), got));
}

TEST_P(GlmDsaTest, ThreadsAndMicroBatchesChangeNoBit) {
  auto base = model(512, 2);
  const std::vector<float> want = eval_all(*base, c_.tokens);
  for (int threads : {1, 3})
    for (int ubatch : {1, 5, 16, 512}) {
      auto m = model(ubatch, threads);
      EXPECT_TRUE(same_bits(eval_all(*m, c_.tokens), want)) << "threads " << threads << " ubatch " << ubatch;
    }
}

// eval(A + B) == eval(A); eval(B) == eval(A + C); truncate(|A|); eval(B), with
// A + B past top_k (RollbackTest's lengths stay below it).
TEST_P(GlmDsaTest, RollbackPastTopKIsExact) {
  const std::vector<int32_t>& t = c_.tokens;
  for (int ubatch : {4, 7}) {
    auto m = model(ubatch);
    const size_t nv = m->hparams().n_vocab;
    const std::vector<float> whole = eval_all(*m, t);  // A = t[0, 20), B = t[20, 48)
    const std::vector<int32_t> A(t.begin(), t.begin() + 20), B(t.begin() + 20, t.end());
    std::vector<int32_t> AC = A;
    for (int i = 0; i < 13; ++i) AC.push_back(static_cast<int32_t>(3 + (i * 41) % 500));
    m->reset();
    std::vector<float> rows(AC.size() * nv);
    m->eval(AC, 0, rows.data());
    ASSERT_EQ(m->truncate(static_cast<int>(A.size())), static_cast<int>(A.size()));
    std::vector<float> b(B.size() * nv);
    m->eval(B, static_cast<int>(A.size()), b.data());
    EXPECT_TRUE(same_bits(b, std::vector<float>(whole.begin() + static_cast<std::ptrdiff_t>(A.size() * nv), whole.end())))
        << "ubatch " << ubatch;
  }
}

// Two sequences past top_k in one forward pass (slot order unlike row order,
// prompts split unevenly) get their solo logits bit for bit: a Shared
// layer reads the selection of its own rows.
TEST_P(GlmDsaTest, BatchedSlotsGetTheirSoloLogits) {
  auto cfg = golden_config();
  cfg.ubatch = 4;
  cfg.n_ctx = 64;
  const std::vector<int32_t> p0(c_.tokens.begin(), c_.tokens.begin() + 30), p1(c_.tokens.begin() + 5, c_.tokens.begin() + 45);
  auto solo = load(c_.gguf, cfg);
  const std::vector<float> want0 = eval_all(*solo, p0), want1 = eval_all(*solo, p1);
  cfg.n_slots = 2;
  auto m = load(c_.gguf, cfg);
  const size_t nv = m->hparams().n_vocab;
  std::vector<float> got0(p0.size() * nv), got1(p1.size() * nv);
  const int cut0 = 9, cut1 = 17;
  std::vector<model::SequenceEval> first = {{1, std::span(p1).subspan(0, cut1), got1.data(), true},
                                            {0, std::span(p0).subspan(0, cut0), got0.data(), true}};
  m->eval_batch(first);
  std::vector<model::SequenceEval> second = {{0, std::span(p0).subspan(cut0), got0.data() + cut0 * nv, true},
                                             {1, std::span(p1).subspan(cut1), got1.data() + cut1 * nv, true}};
  m->eval_batch(second);
  EXPECT_TRUE(same_bits(got0, want0));
  EXPECT_TRUE(same_bits(got1, want1));
}

// The indexer keys are state of their own size: D values per position in
// each full indexer layer, part of the KV bytes.
TEST_P(GlmDsaTest, IndexerKeysAreSizedState) {
  auto m = model(512);
  const model::HParams& hp = m->hparams();
  const auto& types = c_.json["hparams"]["indexer_types"];
  uint64_t full = 0;
  for (const auto& v : types) full += v.get<int>() != 0;
  const model::StateBytes b = m->state_bytes();
  EXPECT_EQ(b.indexer, full * 512 * hp.dsa.head_dim * sizeof(float));
  EXPECT_EQ(b.kv, hp.n_layer * uint64_t{512} * hp.head_dim * sizeof(float) + b.indexer);
  EXPECT_EQ(hp.dsa.top_k, 16u);
}

INSTANTIATE_TEST_SUITE_P(Cases, GlmDsaTest, ::testing::Values("glm-dsa-f32", "glm-dsa-kquants"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace sluice::test
