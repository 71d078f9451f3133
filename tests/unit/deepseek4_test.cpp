// deepseek4 (hyper-connections, compressed KV of ratios 4 and 128, the
// lightning indexer's top-k over CSA blocks, hash routing) against llama.cpp
// (shared/golden/deepseek4-*): every CSA position's selected blocks equal the
// ones llama.cpp selected (NAME.json sparse_selection), in one call and token
// by token; the logits pass the golden rule token by token (GoldenTest checks
// them in one call); micro-batches and rollback change no bit (160 tokens: the
// indexer selects from position 35 on, the first 128-block joins at 127).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "model/arch.h"
#include "model/state/state_spec.h"
#include "model/transformer.h"
#include "golden_rule.h"
#include "model_test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

class Deepseek4Test : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string json = shared_path("golden/" + GetParam() + ".json");
    if (!exists(json)) GTEST_SKIP() << GetParam() << " not found";
    std::ifstream jf(json);
    json_ = nlohmann::json::parse(jf);
    gguf_ = shared_path("golden/" + json_["gguf"].get<std::string>());
    tokens_ = json_["tokens"].get<std::vector<int32_t>>();
  }
  std::unique_ptr<model::Model> model(int ubatch, int threads = 2) const {
    auto cfg = golden_config();
    cfg.ubatch = ubatch;
    cfg.threads = threads;
    return load(gguf_, cfg);
  }
  using Selections = std::map<int, std::map<int, std::vector<int>>>;  // layer -> position -> blocks
  static void observe(model::Model& m, Selections& out) {
    auto* t = dynamic_cast<model::Transformer*>(&m);
    ASSERT_NE(t, nullptr);
    t->set_dsv4_observer(
        [&out](int layer, int pos, const std::vector<int>& blocks) { out[layer][pos] = blocks; });
  }
  nlohmann::json json_;
  std::string gguf_;
  std::vector<int32_t> tokens_;
};

TEST_P(Deepseek4Test, SelectionEqualsLlamaCppInPrefillAndDecode) {
  for (int ubatch : {512, 1}) {
    auto m = model(ubatch);
    Selections got;
    observe(*m, got);
    eval_all(*m, tokens_);
    const auto& layers = json_["sparse_selection"]["layers"];
    ASSERT_EQ(got.size(), layers.size()) << "ubatch " << ubatch << ": CSA layers";
    for (const auto& [name, l] : layers.items()) {
      const int layer = std::stoi(name.substr(4));  // "blk.N"
      const auto want = l["selected"].get<std::vector<std::vector<int>>>();
      ASSERT_TRUE(got.count(layer)) << name;
      int wrong = 0;
      for (size_t p = 0; p < want.size(); ++p) {
        const auto it = got.at(layer).find(static_cast<int>(p));
        const std::vector<int> g = it == got.at(layer).end() ? std::vector<int>{} : it->second;
        if (g != want[p] && wrong++ < 5)
          ADD_FAILURE() << "ubatch " << ubatch << " " << name << " position " << p;
      }
      EXPECT_EQ(wrong, 0) << "ubatch " << ubatch << " " << name
                          << ": positions with another selection";
    }
  }
}

// The golden rule (check_golden.py 1-3) token by token, and bit-identical to
// the one-call logits.
TEST_P(Deepseek4Test, TokenByTokenPassesTheGoldenRuleAndEqualsPrefill) {
  const auto ref = read_f32_file(shared_path("golden/" + json_["logits_file"].get<std::string>()));
  auto m = model(1);
  const size_t nv = m->hparams().n_vocab, n = tokens_.size();
  std::vector<float> got(n * nv);
  for (size_t i = 0; i < n; ++i)
    m->eval(std::span(tokens_).subspan(i, 1), static_cast<int>(i), &got[i * nv]);
  ASSERT_EQ(ref.size(), got.size());
  const auto& tol = json_["tolerance"];
  const GoldenResult r = compare(ref, got, static_cast<int>(n), static_cast<int>(nv),
                                 tol["position_max_abs_diff"].get<double>());
  std::printf("[golden] %-20s token by token: mean|d|/std %.3g  over %.3f  argmax %.3f\n", GetParam().c_str(),
              r.mean_abs / r.std, r.frac_over, r.argmax_agree);
  EXPECT_EQ(golden_violations(r, tol), "");
  auto whole = model(512);
  EXPECT_TRUE(same_bits(eval_all(*whole, tokens_), got));
}

TEST_P(Deepseek4Test, ThreadsAndMicroBatchesChangeNoBit) {
  auto base = model(512, 2);
  const std::vector<float> want = eval_all(*base, tokens_);
  for (auto [threads, ubatch] : {std::pair{1, 7}, std::pair{3, 33}, std::pair{2, 128}}) {
    auto m = model(ubatch, threads);
    EXPECT_TRUE(same_bits(eval_all(*m, tokens_), want))
        << "threads " << threads << " ubatch " << ubatch;
  }
}

// eval(A + C); truncate(|A|); eval(B) == the tail of eval(A + B), with the cut
// inside a CSA block and B completing the first HCA block. At ubatch 16 the
// per-position rows are rings (window 32 + slack 16 = 48 rows; 128 + 16 at
// ratio 128): a C within the slack rolls back exactly; a longer one has
// overwritten A's window, so the state restarts from 0 (truncate says so) and
// re-evaluating A + B from there gives the same bits.
TEST_P(Deepseek4Test, RollbackIsExactWithinTheRingAndRecomputesBeyondIt) {
  const std::vector<int32_t>& t = tokens_;
  auto m = model(16);
  const size_t nv = m->hparams().n_vocab;
  const std::vector<float> whole = eval_all(*m, t);
  const int a = 42;
  for (const int c : {10, 17, 18, 50}) {
    std::vector<int32_t> AC(t.begin(), t.begin() + a);
    for (int i = 0; i < c; ++i) AC.push_back(static_cast<int32_t>(3 + (i * 41) % 500));
    m->reset();
    std::vector<float> rows(AC.size() * nv);
    m->eval(AC, 0, rows.data());
    // Exact while the rings hold the 32 positions before |A| + 1: |C| <= 16 + 1.
    const int r = m->truncate(a);
    EXPECT_EQ(r, c <= 17 ? a : 0) << "|C| " << c;
    const std::vector<int32_t> redo(t.begin() + r, t.end());
    std::vector<float> b(redo.size() * nv);
    m->eval(redo, r, b.data());
    EXPECT_TRUE(same_bits(b, std::vector<float>(whole.begin() + static_cast<std::ptrdiff_t>(r * nv), whole.end())))
        << "|C| " << c;
  }
}

// A slot saved after the rings wrapped and the first 128-block completed
// (140 positions), loaded into a fresh model, continues with the one-call
// logits bit for bit (state_io: the ring's newest rows and the block rows).
TEST_P(Deepseek4Test, SlotSavedPastTheRingsContinuesExactly) {
  const std::vector<int32_t>& t = tokens_;
  const int a = 140;
  auto m = model(16);
  const size_t nv = m->hparams().n_vocab;
  const std::vector<float> whole = eval_all(*model(512), t);
  std::vector<float> rows(a * nv);
  m->eval(std::span(t).first(a), 0, rows.data());
  std::string bytes;
  m->slot_save(0, bytes);
  auto fresh = model(16);
  fresh->slot_load(0, bytes);
  ASSERT_EQ(fresh->n_past(), a);
  const std::vector<int32_t> rest(t.begin() + a, t.end());
  std::vector<float> b(rest.size() * nv);
  fresh->eval(rest, a, b.data());
  EXPECT_TRUE(same_bits(b, std::vector<float>(whole.begin() + static_cast<std::ptrdiff_t>(a * nv), whole.end())));
}

// The per-position rows are a ring of what a token reads back, the blocks one
// row each: a 160-token state at -c 4096 holds 48 (ratio 0 and 4) or 144
// (ratio 128) positions' rows at ubatch 16, and inspect sizes the same bytes.
TEST_P(Deepseek4Test, StateKeepsTheLookbackAsARingAndOneRowPerBlock) {
  auto cfg = golden_config();
  cfg.n_ctx = 4096;
  cfg.ubatch = 16;
  auto m = load(gguf_, cfg);
  const auto specs =
      model::model_state_specs(model::describe_architecture(gguf::GgufModel::open(gguf_)), 4096, 16);
  for (size_t il = 0; il < specs.size(); ++il) {
    const model::LayerStateSpec& s = specs[il];
    const int ratio = s.blocks.ratio;
    EXPECT_TRUE(s.kv.ring) << "layer " << il;
    EXPECT_EQ(s.kv.capacity, (ratio == 128 ? 128 : 32) + 16) << "layer " << il;
    EXPECT_EQ(s.blocks.capacity, ratio > 0 ? 4096 / ratio : 0) << "layer " << il;
  }
  EXPECT_EQ(m->state_bytes().kv, model::state_bytes(specs, model::KvType::F32)->kv);
}

INSTANTIATE_TEST_SUITE_P(Cases, Deepseek4Test,
                         ::testing::Values("deepseek4-f32", "deepseek4-mxfp4"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace sluice::test
