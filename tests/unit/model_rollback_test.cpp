// Explicit rollback on every architecture with a golden case: eval only
// appends, truncate(n) rolls KV rows back exactly, so
//   eval(A + B) == eval(A); eval(B) == eval(A + C); truncate(|A|); eval(B)
// bit for bit, with lengths around the micro-batch size (ubatch 4). The same
// through Session::rewind and on the NextN head's own rows; inspect's state
// bytes are the bytes the model allocates.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "case_name.h"
#include "model_test_support.h"
#include "runtime/session.h"
#include "tools/model_info.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

constexpr int kUbatch = 4;

struct Lengths {
  int a, b, c;
};
// Around the micro-batch: shorter, equal, longer, crossing one or two boundaries.
constexpr Lengths kLengths[] = {{3, 5, 4}, {4, 4, 9}, {5, 3, 7}, {9, 6, 3}};

class RollbackTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = shared_path("golden/" + GetParam() + ".gguf");
    if (!exists(path_)) GTEST_SKIP() << path_ << " not found";
  }
  model::ModelConfig config() const {
    auto cfg = golden_config();
    cfg.ubatch = kUbatch;
    cfg.n_ctx = 64;
    return cfg;
  }
  // Tokens [first, first + n): distinct, valid ids for any of the golden vocabularies.
  static std::vector<int32_t> seq(int first, int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>(1 + (first + 37 * i) % 250));
    return t;
  }
  static std::vector<float> eval_rows(model::Model& m, const std::vector<int32_t>& t) {
    std::vector<float> out(t.size() * m.hparams().n_vocab);
    m.eval(t, m.n_past(), out.data());
    return out;
  }
  std::string path_;
};

TEST_P(RollbackTest, TruncateThenAppendIsBitIdenticalToNeverHavingGoneThere) {
  auto m = load(path_, config());
  const size_t nv = m->hparams().n_vocab;
  const bool recurrent = m->state_bytes().recurrent > 0;  // qwen35moe's DeltaNet layers
  for (const Lengths& l : kLengths) {
    const std::vector<int32_t> A = seq(3, l.a), B = seq(11, l.b), C = seq(29, l.c);
    std::vector<int32_t> AB = A;
    AB.insert(AB.end(), B.begin(), B.end());
    std::vector<int32_t> AC = A;
    AC.insert(AC.end(), C.begin(), C.end());
    const std::string what = "|A| " + std::to_string(l.a) + " |B| " + std::to_string(l.b) + " |C| " + std::to_string(l.c);

    const std::vector<float> whole = eval_all(*m, AB);
    m->reset();
    std::vector<float> split = eval_rows(*m, A);
    const std::vector<float> b1 = eval_rows(*m, B);
    split.insert(split.end(), b1.begin(), b1.end());
    EXPECT_TRUE(same_bits(split, whole)) << what << ": eval(A); eval(B) vs eval(A+B)";

    // Without a checkpoint a recurrent layer falls back to the zero state:
    // truncate says where it landed and the caller re-evaluates from there.
    m->reset();
    const std::vector<float> ac = eval_rows(*m, AC);
    const int r = m->truncate(l.a);
    EXPECT_EQ(r, recurrent ? 0 : l.a) << what;  // KV rows: exact
    EXPECT_EQ(m->n_past(), r);
    std::vector<int32_t> redo(A.begin() + r, A.end());
    redo.insert(redo.end(), B.begin(), B.end());
    const std::vector<float> rb = eval_rows(*m, redo);
    EXPECT_TRUE(same_bits(rb, std::vector<float>(whole.begin() + static_cast<std::ptrdiff_t>(r * nv), whole.end())))
        << what << ": eval(A+C); truncate(|A|); eval(B)";
    // With a checkpoint at |A| the truncate lands there exactly, recurrent or not.
    m->reset();
    eval_rows(*m, A);
    m->checkpoint();
    eval_rows(*m, C);
    EXPECT_EQ(m->truncate(l.a), l.a) << what;
    const std::vector<float> b2 = eval_rows(*m, B);
    EXPECT_TRUE(same_bits(b2, std::vector<float>(whole.begin() + static_cast<std::ptrdiff_t>(l.a * nv), whole.end())))
        << what << ": eval(A); checkpoint; eval(C); truncate(|A|); eval(B)";
    EXPECT_TRUE(same_bits(std::vector<float>(ac.begin(), ac.begin() + static_cast<std::ptrdiff_t>(l.a * nv)),
                          std::vector<float>(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(l.a * nv))))
        << what;
  }
}

TEST_P(RollbackTest, EvalOnlyAppendsAndTruncateOnlyGoesBack) {
  auto m = load(path_, config());
  eval_rows(*m, seq(1, 6));
  std::vector<float> out(2 * m->hparams().n_vocab);
  const std::vector<int32_t> two = seq(2, 2);
  try {
    m->eval(two, 3, out.data());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "eval at position 3 but the model state holds 6 positions (eval only appends: truncate first)");
  }
  EXPECT_EQ(m->n_past(), 6);  // a refused eval changes nothing
  EXPECT_THROW(m->truncate(7), Error);
  EXPECT_EQ(m->truncate(0), 0);
  m->eval(two, 0, out.data());
  EXPECT_EQ(m->n_past(), 2);
}

TEST_P(RollbackTest, SessionRewindTruncatesAndReEvaluatesNothing) {
  runtime::Session s = runtime::Session::open(path_, config());
  const size_t nv = static_cast<size_t>(s.n_vocab());
  const std::vector<int32_t> A = seq(3, 5), B = seq(11, 6), C = seq(29, 7);
  std::vector<float> want((A.size() + B.size()) * nv), got(B.size() * nv), scratch(C.size() * nv);
  std::vector<int32_t> AB = A;
  AB.insert(AB.end(), B.begin(), B.end());
  s.eval_all(AB, want.data());
  s.rewind(0);
  EXPECT_EQ(s.model().n_past(), 0);
  std::vector<float> a_rows(A.size() * nv);
  s.eval_all(A, a_rows.data());
  s.eval_all(C, scratch.data());
  s.rewind(A.size());
  EXPECT_EQ(s.model().n_past(), static_cast<int>(A.size()));  // the rollback is explicit, at rewind
  s.eval_all(B, got.data());
  EXPECT_TRUE(same_bits(got, std::vector<float>(want.begin() + static_cast<std::ptrdiff_t>(A.size() * nv), want.end())));
  EXPECT_EQ(s.recomputed_tokens(), 0u);  // KV rows roll back exactly
  EXPECT_EQ(s.summary().recomputed_tokens, 0u);
}

// inspect sizes the state with the engine's own rule, at the context run uses.
TEST_P(RollbackTest, InspectStateBytesAreTheAllocatedBytes) {
  auto cfg = golden_config();
  cfg.kv_type = model::KvType::F16;  // what run allocates by default, and inspect reports
  cfg.n_ctx = 0;
  auto g = std::make_shared<const gguf::GgufModel>(gguf::GgufModel::open(path_));
  auto m = model::load_model(g, cfg);
  const tools::ModelInfo info = tools::model_info(*g, 0);
  EXPECT_EQ(info.sizing.kv_context, static_cast<uint64_t>(m->n_ctx()));
  EXPECT_EQ(info.sizing.kv_bytes, m->state_bytes().kv);
  EXPECT_EQ(info.sizing.recurrent_bytes, m->state_bytes().recurrent);
  EXPECT_GT(info.sizing.kv_bytes, 0u);
}

INSTANTIATE_TEST_SUITE_P(Cases, RollbackTest,
                         ::testing::Values("qwen3moe-f32", "llama-moe-f32", "llama-dense-f16", "gpt-oss-mxfp4",
                                           "glm4moe-f32", "deepseek2-f32", "deepseek2-mtp-f32", "qwen35moe-f32",
                                           "qwen35moe-kquants", "qwen35moe-mtp-f32", "gemma4-f32", "glm-dsa-f32",
                                           "deepseek4-f32"),
                         CaseName());

// The NextN head keeps its own KV rows, truncated explicitly like the trunk's.
class RollbackMtpHead : public ::testing::TestWithParam<std::string> {};

TEST_P(RollbackMtpHead, HeadTruncateThenAppendIsBitIdentical) {
  const std::string path = shared_path("golden/" + GetParam() + ".gguf");
  if (!exists(path)) GTEST_SKIP() << path << " not found";
  auto cfg = golden_config();
  cfg.ubatch = kUbatch;
  cfg.n_ctx = 64;
  cfg.mtp = true;
  auto m = load(path, cfg);
  const size_t nv = m->hparams().n_vocab, ne = static_cast<size_t>(m->mtp_hidden_width());
  for (const Lengths& l : kLengths) {
    const int n = l.a + l.b;
    std::vector<int32_t> tokens;
    for (int i = 0; i < n + l.c; ++i) tokens.push_back(static_cast<int32_t>(1 + (7 + 37 * i) % 250));
    // Head rows: (t_q, any hidden input); the hidden inputs come from the trunk.
    m->reset();
    std::vector<float> logits(tokens.size() * nv), hidden(tokens.size() * ne);
    m->eval_hidden(tokens, 0, logits.data(), hidden.data(), true);
    std::vector<float> whole(static_cast<size_t>(n) * nv), g(tokens.size() * ne);
    m->mtp_eval(std::span(tokens).first(static_cast<size_t>(n)), hidden.data(), 0, whole.data(), g.data(), true);
    // A, then C rows (other tokens at the same positions), truncate, then B.
    m->mtp_truncate(0);
    std::vector<float> a(static_cast<size_t>(l.a) * nv), c(static_cast<size_t>(l.c) * nv), b(static_cast<size_t>(l.b) * nv);
    m->mtp_eval(std::span(tokens).first(static_cast<size_t>(l.a)), hidden.data(), 0, a.data(), g.data(), true);
    m->mtp_eval(std::span(tokens).last(static_cast<size_t>(l.c)), hidden.data() + static_cast<size_t>(n) * ne, l.a,
                c.data(), g.data(), true);
    EXPECT_EQ(m->mtp_n_past(), l.a + l.c);
    EXPECT_THROW(m->mtp_eval(std::span(tokens).first(1), hidden.data(), l.a, b.data(), g.data(), true), Error);
    m->mtp_truncate(l.a);
    m->mtp_eval(std::span(tokens).subspan(static_cast<size_t>(l.a), static_cast<size_t>(l.b)),
                hidden.data() + static_cast<size_t>(l.a) * ne, l.a, b.data(), g.data(), true);
    a.insert(a.end(), b.begin(), b.end());
    EXPECT_TRUE(same_bits(a, whole)) << l.a << " " << l.b << " " << l.c;
    EXPECT_EQ(m->n_past(), static_cast<int>(tokens.size()));  // the head's truncate leaves the trunk alone
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, RollbackMtpHead, ::testing::Values("deepseek2-mtp-f32", "qwen35moe-mtp-f32"),
                         CaseName());

}  // namespace
}  // namespace sluice::test
