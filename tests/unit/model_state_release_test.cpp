// A model state's memory released and allocated again (ModelState::release,
// allocate: the lazy serve slots of ModelConfig::lazy_slots): a released state
// is empty, refuses appends with an Error, still reports what allocating it
// takes, and an allocated-again state evolves exactly as a fresh one.
#include <gtest/gtest.h>

#include <vector>

#include "model/state/model_state.h"
#include "model/state/recurrent_state.h"
#include "util/error.h"

namespace sluice::model {
namespace SLUICE_TEST_FILE {

std::vector<LayerStateSpec> specs(int n_ctx) {
  LayerStateSpec kv;
  kv.kind = StateKind::KvRows;
  kv.kv = {2, 4, 3, n_ctx};
  LayerStateSpec rec;
  rec.kind = StateKind::Recurrent;
  rec.rec = {3, 5, 2, 4};
  return {kv, rec};
}

// Appends `tokens`: each KV row (pos, token), the recurrent values folded with each token.
void append(ModelState& st, const std::vector<int>& tokens) {
  const int pos0 = st.n_past();
  st.begin_append(static_cast<int>(tokens.size()));
  for (size_t i = 0; i < tokens.size(); ++i) {
    KvRows& kv = st.kv(0);
    std::vector<float> k(static_cast<size_t>(kv.k_dim()),
                         static_cast<float>(pos0 + static_cast<int>(i)));
    std::vector<float> v(static_cast<size_t>(kv.v_dim()), static_cast<float>(tokens[i]));
    kv.store(pos0 + static_cast<int>(i), k.data(), v.data());
    RecurrentState& r = st.recurrent(1);
    for (uint64_t j = 0; j < r.spec().floats(); ++j)
      r.conv()[j] = r.conv()[j] * 0.5f + static_cast<float>(tokens[i]);
  }
  st.commit_append();
}

std::vector<float> recurrent_values(ModelState& st) {
  RecurrentState& r = st.recurrent(1);
  return std::vector<float>(r.conv(), r.conv() + r.spec().floats());
}

TEST(ModelStateRelease, AReleasedStateIsEmptyRefusesAppendsAndKeepsItsSize) {
  ModelState lazy(specs(16), KvType::F16, 16, ModelState::kDefaultMaxCheckpoints,
                  /*allocate_now=*/false);
  ModelState eager(specs(16), KvType::F16, 16);
  EXPECT_FALSE(lazy.allocated());
  EXPECT_TRUE(eager.allocated());
  // 16 rows x (8 + 6) f16 values, and 3*5 + 2*4*4 floats.
  EXPECT_EQ(lazy.bytes().kv, 16u * 14u * 2u);
  EXPECT_EQ(lazy.bytes().recurrent, (15u + 32u) * 4u);
  EXPECT_EQ(lazy.bytes().total(), eager.bytes().total());
  EXPECT_EQ(lazy.n_past(), 0);
  EXPECT_THROW(lazy.begin_append(1), Error);
  lazy.checkpoint();  // nothing to copy: no throw, no checkpoint
  EXPECT_TRUE(lazy.checkpoint_positions().empty());

  append(eager, {5, 6});
  eager.release();
  EXPECT_FALSE(eager.allocated());
  EXPECT_EQ(eager.n_past(), 0);
  EXPECT_TRUE(eager.checkpoint_positions().empty());
  EXPECT_THROW(eager.kv(0), Error);
}

TEST(ModelStateRelease, AStateAllocatedAgainEvolvesAsAFreshOne) {
  ModelState fresh(specs(8), KvType::F32, 8);
  ModelState reused(specs(8), KvType::F32, 8);
  append(reused, {9, 9, 9});
  reused.checkpoint();
  reused.release();
  reused.allocate();
  reused.allocate();  // a no-op on an allocated state
  EXPECT_TRUE(reused.allocated());
  EXPECT_EQ(reused.n_past(), 0);
  append(fresh, {1, 2, 3});
  append(reused, {1, 2, 3});
  EXPECT_EQ(recurrent_values(reused), recurrent_values(fresh));
  EXPECT_EQ(reused.kv(0).n_filled(), 3);
  EXPECT_EQ(reused.truncate(1), 0);  // no checkpoint survived the release: back to the start
}

}  // namespace
}  // namespace sluice::model
