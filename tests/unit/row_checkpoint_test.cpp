// Row checkpoints (ModelState::capture_rows): the recurrent state at the end
// of each of an append's first rows, kept as checkpoints, so truncating MTP
// verification rows restores exactly instead of re-evaluating (issue 27: a
// rejected draft costs no trunk recomputation on a recurrent model).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "model/state/model_state.h"
#include "model/state/recurrent_state.h"
#include "model_test_support.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

using model::KvType;
using model::LayerStateSpec;
using model::ModelState;
using model::RecurrentState;
using model::StateKind;

LayerStateSpec rec_spec() {
  LayerStateSpec s;
  s.kind = StateKind::Recurrent;
  s.rec = {3, 5, 2, 4};  // 3 taps x 5 channels, 2 heads of 4 x 4
  return s;
}

// Appends tokens with a stand-in recurrence (every value depends on every
// token so far, in order) and, as a recurrent mixer does, copies the values
// after each row into the row checkpoint ModelState asks for.
void append(ModelState& st, const std::vector<int>& tokens) {
  st.begin_append(static_cast<int>(tokens.size()));
  RecurrentState& r = st.recurrent(0);
  const uint64_t n = r.spec().floats();
  for (size_t i = 0; i < tokens.size(); ++i) {
    for (uint64_t j = 0; j < n; ++j)
      r.conv()[j] = r.conv()[j] * 0.5f + static_cast<float>(tokens[i]) + j;
    if (float* dst = st.row_capture(0, static_cast<int>(i))) std::copy_n(r.conv(), n, dst);
  }
  st.commit_append();
}

std::vector<float> values(ModelState& st) {
  RecurrentState& r = st.recurrent(0);
  return std::vector<float>(r.conv(), r.conv() + r.spec().floats());
}

TEST(RowCheckpoints, TruncatingVerifyRowsRestoresTheirStateExactly) {
  ModelState ref({rec_spec()}, KvType::F32, 32);
  append(ref, {1, 2, 3, 7});
  const std::vector<float> at4 = values(ref);
  append(ref, {8});
  const std::vector<float> at5 = values(ref);

  ModelState st({rec_spec()}, KvType::F32, 32);
  append(st, {1, 2, 3});
  st.checkpoint();
  st.capture_rows(2);  // a verify batch [t, d1, d2]: rows t and d1 captured
  append(st, {7, 8, 9});
  EXPECT_EQ(st.checkpoint_positions(), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(st.checkpoint_bytes(), 3 * st.bytes().recurrent);
  EXPECT_EQ(st.truncate(5), 5);  // d2 rejected: no fall-back
  EXPECT_EQ(values(st), at5);
  EXPECT_EQ(st.truncate(4), 4);  // d1 rejected too
  EXPECT_EQ(values(st), at4);
  EXPECT_EQ(st.checkpoint_positions(), (std::vector<int>{3, 4}));

  // The capture was for that append only; more rows than the append has are capped.
  append(st, {8, 9});
  EXPECT_EQ(st.checkpoint_positions(), (std::vector<int>{3, 4}));
  st.capture_rows(5);
  append(st, {1});
  EXPECT_EQ(st.checkpoint_positions(), (std::vector<int>{3, 4, 7}));
}

TEST(RowCheckpoints, KeepTheNewestWithinTheLimitAndVanishWithAFailedAppend) {
  ModelState st({rec_spec()}, KvType::F32, 32, /*max_checkpoints=*/2);
  append(st, {1, 2});
  st.checkpoint();
  st.capture_rows(2);
  append(st, {3, 4, 5});
  EXPECT_EQ(st.checkpoint_positions(), (std::vector<int>{3, 4}));  // 2 dropped as the oldest

  st.capture_rows(1);
  st.begin_append(2);
  ASSERT_NE(st.row_capture(0, 0), nullptr);
  EXPECT_EQ(st.row_capture(0, 1), nullptr);
  st.abort_append();
  EXPECT_EQ(st.checkpoint_positions(), (std::vector<int>{3, 4}));
  EXPECT_EQ(st.row_capture(0, 0), nullptr);
}

// The real thing: greedy MTP on the golden qwen35moe model rejects drafts,
// and with row checkpoints no trunk token is evaluated twice; the output is
// the one plain decoding gives.
std::vector<int32_t> generate(const std::string& path, int depth, uint64_t& recomputed,
                              telemetry::MtpCounters& mtp) {
  auto cfg = golden_config();
  cfg.mtp = depth > 0;
  runtime::Session s = runtime::Session::open(path, cfg);
  runtime::MtpOptions o;
  o.depth = depth;
  s.set_mtp(o);
  runtime::Sampler greedy(runtime::SamplerConfig{});
  std::vector<int32_t> ids;
  s.generate(std::vector<int32_t>{1, 42, 7, 300, 9}, 32, greedy, [&](int32_t id) {
    ids.push_back(id);
    return true;
  });
  recomputed = s.recomputed_tokens();
  mtp = s.mtp_counters();
  return ids;
}

TEST(RowCheckpoints, RejectedDraftsOnQwen35moeReEvaluateNoTrunkToken) {
  REQUIRE_SHARED("golden/qwen35moe-mtp-f32.gguf");
  const std::string path = shared_path("golden/qwen35moe-mtp-f32.gguf");
  uint64_t recomputed = 0;
  telemetry::MtpCounters mtp;
  const std::vector<int32_t> want = generate(path, 0, recomputed, mtp);
  for (int depth : {1, 2, 3}) {
    EXPECT_EQ(generate(path, depth, recomputed, mtp), want) << depth;
    EXPECT_GT(mtp.drafted, mtp.accepted)
        << depth << ": no draft was rejected, the check would be empty";
    EXPECT_EQ(recomputed, 0u) << depth;
  }
}

}  // namespace
}  // namespace sluice::test
