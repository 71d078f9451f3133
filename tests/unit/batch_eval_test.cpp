// Sequence slots and eval_batch(): several sequences in one forward pass give
// each sequence exactly (bit for bit) the logits it gets alone, whatever it is
// batched with, however its prompt is split over passes (ubatch 4), and
// whichever step it joins at; truncating one slot leaves the others alone;
// the batch's expert accounting is the union of its routes.
#include <gtest/gtest.h>

#include <cstring>

#include "model/model.h"
#include "case_name.h"
#include "model_test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

constexpr int kUbatch = 4;
constexpr int kSlots = 3;
constexpr int kSteps = 6;  // greedy tokens per sequence

std::vector<int32_t> prompt_of(int i) {
  const int len[kSlots] = {3, 7, 10};  // below, across and over two micro-batches
  std::vector<int32_t> t;
  for (int k = 0; k < len[i]; ++k)
    t.push_back(static_cast<int32_t>(1 + (5 + 11 * i + 37 * k) % 250));
  return t;
}

int32_t argmax(const float* row, size_t nv) {
  int32_t best = 0;
  for (size_t v = 1; v < nv; ++v)
    if (row[v] > row[best]) best = static_cast<int32_t>(v);
  return best;
}

class BatchEvalTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = shared_path("golden/" + GetParam() + ".gguf");
    if (!exists(path_)) GTEST_SKIP() << path_ << " not found";
  }
  model::ModelConfig config(int slots) const {
    auto cfg = golden_config();
    cfg.ubatch = kUbatch;
    cfg.n_ctx = 64;
    cfg.n_slots = slots;
    return cfg;
  }
  // Sequence i alone on a one-slot model: its prompt's logits (every row),
  // then kSteps greedy steps' logits, concatenated; tokens gets the history.
  std::vector<float> solo(model::Model& m, int i, std::vector<int32_t>* tokens = nullptr) const {
    const std::vector<int32_t> p = prompt_of(i);
    std::vector<float> all = eval_all(m, p);
    const size_t nv = m.hparams().n_vocab;
    std::vector<int32_t> hist = p;
    std::vector<float> last(all.end() - static_cast<std::ptrdiff_t>(nv), all.end());
    for (int s = 0; s < kSteps; ++s) {
      const int32_t one[1] = {argmax(last.data(), nv)};
      hist.push_back(one[0]);
      m.eval(one, m.n_past(), last.data());
      all.insert(all.end(), last.begin(), last.end());
    }
    if (tokens) *tokens = hist;
    return all;
  }
  std::string path_;
};

TEST_P(BatchEvalTest, EachSequenceGetsItsSoloLogitsBitForBit) {
  auto one = load(path_, config(1));
  const size_t nv = one->hparams().n_vocab;
  std::vector<std::vector<float>> want(kSlots);
  for (int i = 0; i < kSlots; ++i) want[i] = solo(*one, i);

  auto m = load(path_, config(kSlots));
  ASSERT_EQ(m->n_slots(), kSlots);
  EXPECT_EQ(m->state_bytes().total(), kSlots * m->slot_state_bytes().total());
  // Sequence i joins at step i: its prompt shares passes with the others'
  // decode rows (and with each other's prompt rows across the ubatch).
  std::vector<std::vector<float>> got(kSlots);
  std::vector<std::vector<float>> last(kSlots, std::vector<float>(nv));
  std::vector<int> generated(kSlots, 0);
  std::vector<std::vector<int32_t>> input(kSlots);
  for (int step = 0; step < kSlots + kSteps; ++step) {
    std::vector<model::SequenceEval> batch;
    for (int i = kSlots - 1; i >= 0; --i) {  // slot order differs from row order
      if (step < i || generated[i] == kSteps) continue;
      model::SequenceEval e;
      e.slot = i;
      if (step == i) {
        input[i] = prompt_of(i);
        got[i].resize(input[i].size() * nv);
        e.logits_out = got[i].data();
        e.all_rows = true;
      } else {
        input[i] = {argmax(last[i].data(), nv)};
        e.logits_out = last[i].data();
        ++generated[i];
      }
      e.tokens = input[i];
      batch.push_back(e);
    }
    if (batch.empty()) break;
    m->eval_batch(batch);
    for (const model::SequenceEval& e : batch) {
      if (e.all_rows)
        std::copy(got[e.slot].end() - static_cast<std::ptrdiff_t>(nv), got[e.slot].end(),
                  last[e.slot].begin());
      else
        got[e.slot].insert(got[e.slot].end(), last[e.slot].begin(), last[e.slot].end());
    }
  }
  for (int i = 0; i < kSlots; ++i) {
    EXPECT_EQ(generated[i], kSteps);
    EXPECT_TRUE(same_bits(got[i], want[i])) << "sequence " << i << " batched vs alone";
    EXPECT_EQ(m->slot_n_past(i), static_cast<int>(prompt_of(i).size()) + kSteps);
  }

  const model::ModelStats st = m->stats();
  EXPECT_GT(st.batch.steps, 0u);
  EXPECT_EQ(st.batch.rows, st.tokens_evaluated);
  EXPECT_LE(st.batch.union_experts, st.batch.sequence_experts);
  if (m->hparams().is_moe()) {
    // The union is what the MoE layers fetched: one routed count per
    // distinct expert per (layer, pass).
    EXPECT_EQ(st.batch.union_experts, st.experts.routed);
    EXPECT_LT(st.batch.union_experts, st.batch.sequence_experts)
        << "three sequences shared no expert in any layer";
  }
}

TEST_P(BatchEvalTest, TruncatingOneSlotLeavesTheOthersAlone) {
  auto one = load(path_, config(1));
  const size_t nv = one->hparams().n_vocab;
  std::vector<std::vector<int32_t>> hist(kSlots);
  std::vector<std::vector<float>> want(kSlots);
  for (int i = 0; i < kSlots; ++i) want[i] = solo(*one, i, &hist[i]);

  auto m = load(path_, config(kSlots));
  for (int i = 0; i < kSlots; ++i) m->slot_checkpoint(i);  // no-op for KV-only models
  // Every slot holds its whole history but the last token.
  std::vector<model::SequenceEval> batch(kSlots);
  std::vector<std::vector<int32_t>> head(kSlots);
  for (int i = 0; i < kSlots; ++i) {
    head[i].assign(hist[i].begin(), hist[i].end() - 1);
    batch[i].slot = i;
    batch[i].tokens = head[i];
  }
  m->eval_batch(batch);
  // Slot 1 rolls back to half of its prompt (a recurrent layer may land
  // earlier: truncate says where) and is re-evaluated from there.
  const int n1 = static_cast<int>(prompt_of(1).size()) / 2;
  const int r = m->slot_truncate(1, n1);
  EXPECT_LE(r, n1);
  EXPECT_EQ(m->slot_n_past(1), r);
  for (int i : {0, 2}) EXPECT_EQ(m->slot_n_past(i), static_cast<int>(head[i].size()));
  // The last token of every sequence (slot 1 with its re-evaluated tail):
  // each one's final logits are its solo ones.
  std::vector<std::vector<int32_t>> tail(kSlots);
  std::vector<std::vector<float>> out(kSlots, std::vector<float>(nv));
  for (int i = 0; i < kSlots; ++i) {
    tail[i].assign(hist[i].begin() + m->slot_n_past(i), hist[i].end());
    batch[i].tokens = tail[i];
    batch[i].logits_out = out[i].data();
  }
  m->eval_batch(batch);
  for (int i = 0; i < kSlots; ++i) {
    const std::vector<float> w(want[i].end() - static_cast<std::ptrdiff_t>(nv), want[i].end());
    EXPECT_TRUE(same_bits(out[i], w)) << "sequence " << i;
  }
}

TEST_P(BatchEvalTest, BadBatchesAreErrorsThatChangeNothing) {
  auto m = load(path_, config(2));
  const std::vector<int32_t> t = prompt_of(0);
  std::vector<model::SequenceEval> twice = {{0, t, nullptr, false}, {0, t, nullptr, false}};
  EXPECT_THROW(m->eval_batch(twice), Error);
  std::vector<model::SequenceEval> bad_slot = {{0, t, nullptr, false}, {2, t, nullptr, false}};
  EXPECT_THROW(m->eval_batch(bad_slot), Error);
  const std::vector<int32_t> bad_tok = {1, -1};
  std::vector<model::SequenceEval> bad_token = {{0, t, nullptr, false},
                                                {1, bad_tok, nullptr, false}};
  EXPECT_THROW(m->eval_batch(bad_token), Error);
  EXPECT_EQ(m->slot_n_past(0), 0);
  EXPECT_EQ(m->slot_n_past(1), 0);
  EXPECT_THROW(m->slot_truncate(5, 0), Error);
}

INSTANTIATE_TEST_SUITE_P(Cases, BatchEvalTest,
                         ::testing::Values("qwen3moe-f32", "qwen3moe-kquants", "deepseek2-f32",
                                           "qwen35moe-f32", "gpt-oss-mxfp4", "llama-dense-f16", "gemma4-f32", "glm-dsa-f32",
                                           "deepseek4-f32"),
                         CaseName());

}  // namespace
}  // namespace sluice::test
