// Sliding-window layers keep only their window (state_spec.h): gpt-oss's SWA
// layers hold window + slack rows as a ring, position p in row p % capacity.
// On the gpt-oss golden model (window 8) with prompts several times the ring:
// the ring gives the full-capacity model's logits bit for bit (prefill and
// token by token, alone and batched in slots); a truncate within the slack
// is exact; one further back falls back to position 0 and says so (truncate's
// result, Session::recomputed_tokens), and the re-evaluated tail is the same
// bits. KvRows' ring itself refuses reads of overwritten positions. A slot
// saved or copied after its ring wrapped continues exactly.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/model.h"
#include "model/state/kv_rows.h"
#include "model/state/model_state.h"
#include "model_test_support.h"
#include "runtime/session.h"
#include "tools/model_info.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

constexpr int kWindow = 8;   // gpt-oss-mxfp4's n_swa
constexpr int kUbatch = 4;   // the ring model's micro-batch: slack max(4, kMinRingSlack) = 16
constexpr int kCtx = 160;
constexpr int kRing = kWindow + model::kMinRingSlack;  // 24 rows per SWA layer

std::vector<int32_t> seq(int first, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>(1 + (first + 37 * i) % 250));
  return t;
}

std::vector<float> rows(const std::vector<float>& all, size_t nv, int from, int to) {
  return {all.begin() + static_cast<std::ptrdiff_t>(from * nv), all.begin() + static_cast<std::ptrdiff_t>(to * nv)};
}

class SwaRing : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = shared_path("golden/gpt-oss-mxfp4.gguf");
    if (!exists(path_)) GTEST_SKIP() << path_ << " not found";
  }
  // ring: ubatch 4 (rings of 24 rows); full: ubatch 512, whose slack makes
  // the ring longer than the context, so every layer keeps all kCtx rows.
  model::ModelConfig config(bool ring, int slots = 1) const {
    auto cfg = golden_config();
    cfg.n_ctx = kCtx;
    cfg.ubatch = ring ? kUbatch : 512;
    cfg.n_slots = slots;
    return cfg;
  }
  std::string path_;
};

TEST_F(SwaRing, RingHoldsTheWindowAndGivesTheFullContextLogits) {
  auto ring = load(path_, config(true));
  auto full = load(path_, config(false));
  // gpt-oss alternates SWA and full layers: half the layers shrink to 24 rows.
  const model::HParams& hp = ring->hparams();
  const uint64_t row_bytes = uint64_t{hp.n_head_kv} * (hp.head_dim + hp.head_dim_v) * sizeof(float);
  const uint64_t n_swa_layers = hp.n_layer / 2;
  EXPECT_EQ(full->state_bytes().kv, uint64_t{hp.n_layer} * kCtx * row_bytes);
  EXPECT_EQ(ring->state_bytes().kv, (hp.n_layer - n_swa_layers) * kCtx * row_bytes + n_swa_layers * kRing * row_bytes);

  const std::vector<int32_t> prompt = seq(5, 70);  // ~3 rings
  const std::vector<float> want = prefill_and_decode(*full, prompt, 40);
  EXPECT_TRUE(same_bits(prefill_and_decode(*ring, prompt, 40), want)) << "prefill, then 40 decode steps";
  // Token by token through the ring: the same bits.
  ring->reset();
  const size_t nv = hp.n_vocab;
  std::vector<float> one(nv), got;
  for (size_t i = 0; i < prompt.size(); ++i) {
    ring->eval(std::span(prompt).subspan(i, 1), static_cast<int>(i), one.data());
    got.insert(got.end(), one.begin(), one.end());
  }
  EXPECT_TRUE(same_bits(got, rows(want, nv, 0, static_cast<int>(prompt.size()))));
}

TEST_F(SwaRing, TruncateWithinTheSlackIsExactAndFurtherBackRecomputesFromZero) {
  auto full = load(path_, config(false));
  auto m = load(path_, config(true));
  const size_t nv = m->hparams().n_vocab;
  // |A| 40 (past the ring), then C of |C| tokens, truncate back to |A|, then B.
  const std::vector<int32_t> A = seq(3, 40), B = seq(11, 10);
  std::vector<int32_t> AB = A;
  AB.insert(AB.end(), B.begin(), B.end());
  const std::vector<float> whole = eval_all(*full, AB);
  for (const int c : {5, model::kMinRingSlack, model::kMinRingSlack + 1, model::kMinRingSlack + 2, 30}) {
    const std::vector<int32_t> C = seq(29, c);
    m->reset();
    std::vector<float> a(A.size() * nv), cl(C.size() * nv);
    m->eval(A, 0, a.data());
    m->eval(C, m->n_past(), cl.data());
    // Exact while the ring still holds the window before |A| (the keys
    // [|A| + 1 - window, |A|): a rollback of up to slack + 1 rows), else back
    // to the start: never silently wrong.
    const bool exact = c <= model::kMinRingSlack + 1;
    const int r = m->truncate(static_cast<int>(A.size()));
    EXPECT_EQ(r, exact ? static_cast<int>(A.size()) : 0) << "|C| " << c;
    EXPECT_EQ(m->n_past(), r);
    const std::vector<int32_t> redo(AB.begin() + r, AB.end());
    std::vector<float> out(redo.size() * nv);
    m->eval(redo, r, out.data());
    EXPECT_TRUE(same_bits(out, rows(whole, nv, r, static_cast<int>(AB.size())))) << "|C| " << c;
    EXPECT_TRUE(same_bits(a, rows(whole, nv, 0, static_cast<int>(A.size()))));
  }
}

TEST_F(SwaRing, SessionRewindPastTheRingReportsTheRecomputedTokens) {
  runtime::Session s = runtime::Session::open(path_, config(true));
  auto full = load(path_, config(false));
  const size_t nv = static_cast<size_t>(s.n_vocab());
  const std::vector<int32_t> A = seq(3, 30), B = seq(11, 6), C = seq(29, 40);
  std::vector<int32_t> AB = A;
  AB.insert(AB.end(), B.begin(), B.end());
  const std::vector<float> want = eval_all(*full, AB);
  std::vector<float> a(A.size() * nv), c(C.size() * nv), b(B.size() * nv);
  s.eval_all(A, a.data());
  s.eval_all(C, c.data());
  s.rewind(A.size());
  EXPECT_EQ(s.model().n_past(), 0);  // 40 rows back: the ring no longer holds A's window
  s.eval_all(B, b.data());
  EXPECT_TRUE(same_bits(b, rows(want, nv, static_cast<int>(A.size()), static_cast<int>(AB.size()))));
  EXPECT_EQ(s.recomputed_tokens(), A.size());
  EXPECT_EQ(s.summary().recomputed_tokens, A.size());
}

TEST_F(SwaRing, BatchedSlotsGetTheirSoloLogitsAndTruncateAlone) {
  auto full = load(path_, config(false));
  auto m = load(path_, config(true, 2));
  const size_t nv = m->hparams().n_vocab;
  const std::vector<int32_t> p0 = seq(5, 50), p1 = seq(17, 33);
  const std::vector<float> w0 = eval_all(*full, p0), w1 = eval_all(*full, p1);
  std::vector<float> g0(p0.size() * nv), g1(p1.size() * nv);
  std::vector<model::SequenceEval> batch = {{0, p0, g0.data(), true}, {1, p1, g1.data(), true}};
  m->eval_batch(batch);
  EXPECT_TRUE(same_bits(g0, w0));
  EXPECT_TRUE(same_bits(g1, w1));
  // Slot 1 back past its ring (to 0), slot 0 within its slack (exact).
  EXPECT_EQ(m->slot_truncate(1, 10), 0);
  EXPECT_EQ(m->slot_truncate(0, 45), 45);
  const std::vector<int32_t> t0(p0.begin() + 45, p0.end()), t1(p1.begin(), p1.end());
  std::vector<float> o0(t0.size() * nv), o1(t1.size() * nv);
  batch = {{0, t0, o0.data(), true}, {1, t1, o1.data(), true}};
  m->eval_batch(batch);
  EXPECT_TRUE(same_bits(o0, rows(w0, nv, 45, static_cast<int>(p0.size()))));
  EXPECT_TRUE(same_bits(o1, w1));
}

// A slot's state saved (or copied to another slot) after the ring wrapped:
// the file holds the ring's newest positions, and the continuation is the
// full-context model's, bit for bit. A layer that keeps every row refuses a
// wrapped ring's file; a ring takes a full file (keeping its newest rows).
TEST_F(SwaRing, SlotSaveAndCopyPastTheRingContinueAsNeverStopping) {
  auto full = load(path_, config(false));
  auto m = load(path_, config(true, 2));
  const size_t nv = m->hparams().n_vocab;
  const std::vector<int32_t> A = seq(3, 40), B = seq(11, 10);  // |A| past the 24-row ring
  std::vector<int32_t> AB = A;
  AB.insert(AB.end(), B.begin(), B.end());
  const std::vector<float> want = rows(eval_all(*full, AB), nv, static_cast<int>(A.size()), static_cast<int>(AB.size()));
  std::vector<float> a(A.size() * nv), out(B.size() * nv);
  m->eval(A, 0, a.data());
  std::string ring_bytes;
  m->slot_save(0, ring_bytes);
  m->slot_copy(0, 1);
  EXPECT_EQ(m->slot_n_past(1), static_cast<int>(A.size()));
  std::vector<model::SequenceEval> batch = {{1, B, out.data(), true}};
  m->eval_batch(batch);
  EXPECT_TRUE(same_bits(out, want)) << "slot_copy past the ring";

  auto restored = load(path_, config(true));
  restored->slot_load(0, ring_bytes);
  EXPECT_EQ(restored->n_past(), static_cast<int>(A.size()));
  restored->eval(B, restored->n_past(), out.data());
  EXPECT_TRUE(same_bits(out, want)) << "slot_load of a wrapped ring";

  auto keeps_all = load(path_, config(false));
  try {
    keeps_all->slot_load(0, ring_bytes);
    ADD_FAILURE() << "a wrapped ring's file was loaded into a layer that keeps every row";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("keeps every row"), std::string::npos) << e.what();
    EXPECT_EQ(keeps_all->n_past(), 0);
  }

  full->reset();
  full->eval(A, 0, a.data());
  std::string full_bytes;
  full->slot_save(0, full_bytes);
  restored->reset();
  restored->slot_load(0, full_bytes);
  restored->eval(B, restored->n_past(), out.data());
  EXPECT_TRUE(same_bits(out, want)) << "slot_load of every row into a ring";
}

TEST_F(SwaRing, InspectReportsTheRingSizedKvBytes) {
  auto cfg = golden_config();
  cfg.kv_type = model::KvType::F16;
  cfg.n_ctx = 4096;
  auto g = std::make_shared<const gguf::GgufModel>(gguf::GgufModel::open(path_));
  auto m = model::load_model(g, cfg);
  const tools::ModelInfo info = tools::model_info(*g, 4096);
  EXPECT_EQ(info.sizing.kv_bytes, m->state_bytes().kv);
  const model::HParams& hp = m->hparams();
  const uint64_t row_bytes = uint64_t{hp.n_head_kv} * (hp.head_dim + hp.head_dim_v) * 2;
  const uint64_t ring = kWindow + model::kDefaultUbatch;
  EXPECT_EQ(info.sizing.kv_bytes, hp.n_layer / 2 * (4096 + ring) * row_bytes);
}

TEST(KvRowsRing, KeepsTheNewestCapacityPositionsAndRefusesOlderOnes) {
  model::KvRows kv(model::KvType::F32, 4, 1, 1, /*ring=*/true);
  kv.set_filled(6);  // positions 0..5: 0 and 1 are overwritten by 4 and 5
  EXPECT_EQ(kv.first_held(), 2);
  for (int p = 2; p < 6; ++p) {
    const float k = static_cast<float>(p), v = -k;
    kv.store(p, &k, &v);
  }
  float out = 0;
  kv.load_k(5, &out);
  EXPECT_EQ(out, 5.0f);
  kv.load_v(2, &out);
  EXPECT_EQ(out, -2.0f);
  EXPECT_EQ(kv.row(5), 1);
  EXPECT_THROW(kv.load_k(1, &out), Error);
  EXPECT_THROW(kv.store(0, &out, &out), Error);
  kv.truncate(3);  // a ring keeps what it held: 2 only
  EXPECT_EQ(kv.first_held(), 2);
  kv.load_k(2, &out);
  EXPECT_EQ(out, 2.0f);
  EXPECT_THROW(kv.load_k(3, &out), Error);
  model::KvRows full(model::KvType::F32, 4, 1, 1);
  EXPECT_THROW(full.set_filled(5), Error);  // not a ring: the context is full
}

}  // namespace
}  // namespace sluice::test
