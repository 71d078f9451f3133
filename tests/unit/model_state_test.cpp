// The per-layer model state (model/state/) and its rollback contract:
// KV rows roll back exactly, a recurrent layer falls back to a checkpoint and
// says so, sizes agree with what inspect reports.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/arch.h"
#include "model/state/model_state.h"
#include "model/state/recurrent_state.h"
#include "util/error.h"

namespace sluice::model {
namespace SLUICE_TEST_FILE {

LayerStateSpec kv_spec(int n_ctx, int heads = 2, int dk = 4, int dv = 3) {
  LayerStateSpec s;
  s.kind = StateKind::KvRows;
  s.kv = {heads, dk, dv, n_ctx};
  return s;
}

LayerStateSpec rec_spec() {
  LayerStateSpec s;
  s.kind = StateKind::Recurrent;
  s.rec = {3, 5, 2, 4};  // 3 taps x 5 channels, 2 heads of 4 x 4
  return s;
}

// Writes a token's "update" into every layer of the open append: KV row =
// (pos, token), recurrent values += token (a stand-in for a real recurrence:
// the value depends on every token so far, in order).
void append(ModelState& st, const std::vector<int>& tokens) {
  const int pos0 = st.n_past();
  st.begin_append(static_cast<int>(tokens.size()));
  for (int l = 0; l < st.n_layers(); ++l) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (st.spec(l).kind == StateKind::KvRows) {
        KvRows& kv = st.kv(l);
        std::vector<float> k(static_cast<size_t>(kv.k_dim()), static_cast<float>(pos0 + static_cast<int>(i)));
        std::vector<float> v(static_cast<size_t>(kv.v_dim()), static_cast<float>(tokens[i]));
        kv.store(pos0 + static_cast<int>(i), k.data(), v.data());
      } else if (st.spec(l).kind == StateKind::Recurrent) {
        RecurrentState& r = st.recurrent(l);
        const uint64_t n = r.spec().floats();
        for (uint64_t j = 0; j < n; ++j) r.conv()[j] = r.conv()[j] * 0.5f + static_cast<float>(tokens[i]);
      }
    }
  }
  st.commit_append();
}

std::vector<float> recurrent_values(ModelState& st, int layer) {
  RecurrentState& r = st.recurrent(layer);
  return std::vector<float>(r.conv(), r.conv() + r.spec().floats());
}

TEST(ModelState, BytesAreWhatTheSpecsSay) {
  const std::vector<LayerStateSpec> specs = {kv_spec(16), rec_spec(), LayerStateSpec{}, kv_spec(16, 1, 6, 0)};
  for (KvType t : {KvType::F32, KvType::F16}) {
    ModelState st(specs, t, 16);
    const StateBytes want = *state_bytes(specs, t);
    EXPECT_EQ(st.bytes().kv, want.kv);
    EXPECT_EQ(st.bytes().recurrent, want.recurrent);
    EXPECT_EQ(want.kv, 16u * ((2 * 4 + 2 * 3) + 6) * kv_type_bytes(t));
    EXPECT_EQ(want.recurrent, (3u * 5 + 2 * 4 * 4) * 4);
  }
  const LayerStateSpec huge = kv_spec(1 << 30, 1 << 10, 1 << 20, 0);  // 2^62 bytes a layer
  EXPECT_TRUE(state_bytes({huge}, KvType::F32).has_value());
  EXPECT_FALSE(state_bytes({huge, huge, huge, huge}, KvType::F32).has_value());  // reported, never wrapped
}

TEST(ModelState, RecurrentStateStartsAtZeroAndRestoresACopy) {
  RecurrentState r(rec_spec().rec);
  EXPECT_EQ(r.bytes(), (3u * 5 + 2 * 4 * 4) * 4);
  for (uint64_t i = 0; i < r.spec().floats(); ++i) EXPECT_EQ(r.conv()[i], 0.0f);
  EXPECT_EQ(r.matrices(), r.conv() + 15);  // matrices follow the conv taps
  r.conv()[0] = 1.0f;
  r.matrices()[31] = 2.0f;
  std::vector<float> saved;
  r.save(saved);
  r.conv()[0] = 7.0f;
  r.matrices()[31] = 8.0f;
  r.restore(saved);
  EXPECT_EQ(r.conv()[0], 1.0f);
  EXPECT_EQ(r.matrices()[31], 2.0f);
  r.reset();
  EXPECT_EQ(r.conv()[0], 0.0f);
  EXPECT_EQ(r.matrices()[31], 0.0f);
  EXPECT_THROW(r.restore(std::vector<float>(3)), Error);
}

TEST(ModelState, KvRowsTruncateExactly) {
  ModelState st({kv_spec(16), kv_spec(16)}, KvType::F32, 16);
  append(st, {5, 6, 7, 8, 9});
  st.checkpoint();  // nothing recurrent: a no-op
  EXPECT_TRUE(st.checkpoint_positions().empty());
  EXPECT_EQ(st.truncate(2), 2);
  EXPECT_EQ(st.n_past(), 2);
  EXPECT_EQ(st.kv(1).n_filled(), 2);
  append(st, {1, 2});
  float v[6];
  st.kv(0).load_v(2, v);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(st.truncate(4), 4);  // n == n_past: nothing to do
  try {
    st.truncate(5);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "truncate to position 5 but the model state holds 4 positions");
  }
  EXPECT_THROW(st.recurrent(0), Error);
}

TEST(ModelState, RecurrentTruncateFallsBackToTheNewestCheckpointAtOrBefore) {
  ModelState st({kv_spec(32), rec_spec()}, KvType::F32, 32, /*max_checkpoints=*/2);
  append(st, {1, 2, 3});
  const std::vector<float> at3 = recurrent_values(st, 1);
  st.checkpoint();
  append(st, {4, 5});
  const std::vector<float> at5 = recurrent_values(st, 1);
  st.checkpoint();
  append(st, {6, 7, 8});
  EXPECT_EQ(st.checkpoint_positions(), (std::vector<int>{3, 5}));
  EXPECT_EQ(st.checkpoint_bytes(), 2 * st.bytes().recurrent);

  // Exactly at a checkpoint: no loss.
  EXPECT_EQ(st.truncate(5), 5);
  EXPECT_EQ(recurrent_values(st, 1), at5);
  EXPECT_EQ(st.kv(0).n_filled(), 5);
  // Between checkpoints: back to 3; the caller re-evaluates [3, 4).
  append(st, {9});
  EXPECT_EQ(st.truncate(4), 3);
  EXPECT_EQ(st.n_past(), 3);
  EXPECT_EQ(st.kv(0).n_filled(), 3);
  EXPECT_EQ(recurrent_values(st, 1), at3);
  EXPECT_EQ(st.checkpoint_positions(), (std::vector<int>{3}));  // the one past 3 is gone
  // Re-evaluating the same tokens gives the same state as before.
  append(st, {4, 5});
  EXPECT_EQ(recurrent_values(st, 1), at5);
  // Before every checkpoint: the zero state at 0.
  EXPECT_EQ(st.truncate(2), 0);
  EXPECT_EQ(recurrent_values(st, 1), std::vector<float>(rec_spec().rec.floats(), 0.0f));
  EXPECT_TRUE(st.checkpoint_positions().empty());
}

TEST(ModelState, CheckpointsKeepTheNewestAndRefreshTheSamePosition) {
  ModelState st({rec_spec()}, KvType::F16, 32, /*max_checkpoints=*/2);
  for (int i = 1; i <= 4; ++i) {
    append(st, {i});
    st.checkpoint();
    st.checkpoint();  // the same position: refreshed, not duplicated
  }
  EXPECT_EQ(st.checkpoint_positions(), (std::vector<int>{3, 4}));
  EXPECT_EQ(st.truncate(2), 0);  // 1 and 2 were dropped as the oldest
}

TEST(ModelState, AFailedAppendKeepsOnlyWhatIsTrue) {
  ModelState st({kv_spec(8), rec_spec()}, KvType::F32, 8);
  append(st, {1, 2});
  st.checkpoint();
  const std::vector<float> at2 = recurrent_values(st, 1);
  append(st, {3});
  st.begin_append(2);
  st.recurrent(1).conv()[0] = 99.0f;  // a partial update, then a failure
  EXPECT_EQ(st.abort_append(), 2);    // the recurrent layer cannot be trusted past its checkpoint
  EXPECT_EQ(recurrent_values(st, 1), at2);
  EXPECT_EQ(st.kv(0).n_filled(), 2);
  try {
    st.begin_append(7);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "context full: 9 positions needed, context size is 8 (raise -c)");
  }
  EXPECT_EQ(st.n_past(), 2);
}

TEST(ModelState, SpecsFollowTheMixer) {
  HParams hp;
  hp.n_head_kv = 4;
  hp.head_dim = 64;
  hp.head_dim_v = 32;
  LayerDesc gqa;
  const LayerStateSpec g = layer_state_spec(gqa, hp, 100, kDefaultUbatch);
  EXPECT_EQ(g.kind, StateKind::KvRows);
  EXPECT_EQ(g.kv.k_dim(), 256);
  EXPECT_EQ(g.kv.v_dim(), 128);
  EXPECT_EQ(g.kv.capacity, 100);
  LayerDesc mla;
  mla.attn.kind = AttentionKind::Mla;
  hp.head_dim = 576;  // kv_lora_rank 512 + rope 64
  const LayerStateSpec m = layer_state_spec(mla, hp, 100, kDefaultUbatch);
  EXPECT_EQ(m.kv.k_dim(), 576);
  EXPECT_EQ(m.kv.v_dim(), 0);  // values are the key row's first dims
}

}  // namespace
}  // namespace sluice::model
