// Routing trims (moe/trims.h) on hand-built tables with worked-out results,
// and the trim flags / environment fallbacks (cli/trim_flags.h,
// moe/trim_config.h).
//
// Weights are mostly dyadic (exact in float) so expected values are exact;
// where a renormalisation divides by a non-power of two, the expected value is
// written as the same float division the contract specifies (w / float(sum)).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/trim_flags.h"
#include "moe/trims.h"
#include "util/error.h"

namespace sluice::moe {
namespace SLUICE_TEST_FILE {

using Rows = std::vector<std::vector<ExpertWeight>>;

RoutingTable table(const Rows& rows) { return RoutingTable::from_rows(rows); }

std::vector<ExpertWeight> row_of(const RoutingTable& t, int p) {
  const auto r = t.row(p);
  return {r.begin(), r.end()};
}

// Message of the sluice::Error thrown by fn ("" when nothing is thrown).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const ExpertCachedFn kNothingCached = [](int32_t) { return false; };

// ---- RoutingTable ------------------------------------------------------------

TEST(TrimsTable, RejectsRowsBreakingTheInvariants) {
  EXPECT_NE(error_of([] { table({{{1, 0.25f}, {2, 0.5f}}}); }).find("descending"), std::string::npos);
  EXPECT_NE(error_of([] { table({{{1, 0.5f}, {1, 0.25f}}}); }).find("appears twice"), std::string::npos);
  EXPECT_NE(error_of([] { table({{{-1, 0.5f}}}); }).find("negative expert"), std::string::npos);
  EXPECT_NE(error_of([] { table({{{3, NAN}}}); }).find("non-finite"), std::string::npos);
  RoutingTable t(2, 1);
  const std::vector<ExpertWeight> two{{1, 0.5f}, {2, 0.25f}};
  EXPECT_NE(error_of([&] { t.set_row(0, two); }).find("exceed capacity"), std::string::npos);
  EXPECT_NE(error_of([&] { t.row(2); }).find("position 2"), std::string::npos);
}

TEST(TrimsTable, FromDenseKeepsTheRouterLayout) {
  const int32_t ex[] = {4, 1, 0, 7};
  const float w[] = {0.75f, 0.25f, 0.5f, 0.5f};
  const auto t = RoutingTable::from_dense(ex, w, 2, 2);
  EXPECT_EQ(t, table({{{4, 0.75f}, {1, 0.25f}}, {{0, 0.5f}, {7, 0.5f}}}));
}

// ---- top-k -------------------------------------------------------------------

TEST(TrimsTopK, TiesGoToTheLowerExpertId) {
  const std::vector<float> probs{0.0625f, 0.25f, 0.25f, 0.125f, 0.3125f};
  std::vector<ExpertWeight> out;
  select_top_k(probs, 2, /*normalize=*/false, out);
  EXPECT_EQ(out, (std::vector<ExpertWeight>{{4, 0.3125f}, {1, 0.25f}}));  // e1 beats e2 on the tie
  select_top_k(probs, 3, false, out);
  EXPECT_EQ(out, (std::vector<ExpertWeight>{{4, 0.3125f}, {1, 0.25f}, {2, 0.25f}}));
  // A tie where the higher id comes first in memory still goes to the lower id.
  const std::vector<float> reversed{0.25f, 0.0f, 0.0f, 0.25f};
  select_top_k(reversed, 1, false, out);
  EXPECT_EQ(out, (std::vector<ExpertWeight>{{0, 0.25f}}));
}

TEST(TrimsTopK, NormalizesWithTheRoutersArithmetic) {
  const std::vector<float> probs{0.0625f, 0.25f, 0.25f, 0.125f, 0.3125f};
  std::vector<ExpertWeight> out;
  select_top_k(probs, 3, true, out);  // sum 0.8125 (exact in float)
  EXPECT_EQ(out, (std::vector<ExpertWeight>{{4, 0.3125f / 0.8125f}, {1, 0.25f / 0.8125f}, {2, 0.25f / 0.8125f}}));
  select_top_k(probs, 2, true, out);  // 0.3125 + 0.25 = 0.5625
  EXPECT_EQ(out, (std::vector<ExpertWeight>{{4, 0.3125f / 0.5625f}, {1, 0.25f / 0.5625f}}));
  // All-zero probabilities: the divisor is clamped (2^-14), weights stay 0.
  select_top_k(std::vector<float>{0.0f, 0.0f}, 1, true, out);
  EXPECT_EQ(out, (std::vector<ExpertWeight>{{0, 0.0f}}));
}

TEST(TrimsTopK, RejectsBadArguments) {
  std::vector<ExpertWeight> out;
  const std::vector<float> probs{0.5f, 0.5f};
  EXPECT_FALSE(error_of([&] { select_top_k(probs, 0, true, out); }).empty());
  EXPECT_FALSE(error_of([&] { select_top_k(probs, 3, true, out); }).empty());
  EXPECT_NE(error_of([&] { select_top_k(std::vector<float>{0.5f, NAN}, 1, true, out); }).find("expert 1 is NaN"),
            std::string::npos);
}

TEST(TrimsTopK, EffectiveTopKOverridesTheModel) {
  TrimConfig cfg;
  EXPECT_EQ(effective_top_k(cfg, 4, 8), 4);
  cfg.top_k = 2;
  EXPECT_EQ(effective_top_k(cfg, 4, 8), 2);
  cfg.top_k = 8;
  EXPECT_EQ(effective_top_k(cfg, 4, 8), 8);  // more than the model's k is allowed
  cfg.top_k = 9;
  EXPECT_NE(error_of([&] { effective_top_k(cfg, 4, 8); }).find("--moe-top-k"), std::string::npos);
}

// ---- top-p -------------------------------------------------------------------

const Rows kTopPRows{{{3, 0.5f}, {1, 0.25f}, {7, 0.125f}, {2, 0.125f}}};

TEST(TrimsTopP, MassExactlyPReachesIt) {
  auto t = table(kTopPRows);
  EXPECT_EQ(trim_top_p(t, 0.75f, true), std::vector<int>{2});
  EXPECT_EQ(row_of(t, 0), (std::vector<ExpertWeight>{{3, 0.5f / 0.75f}, {1, 0.25f / 0.75f}}));
  t = table(kTopPRows);
  trim_top_p(t, 0.5f, true);  // top-1 alone has mass 0.5
  EXPECT_EQ(row_of(t, 0), (std::vector<ExpertWeight>{{3, 1.0f}}));
}

TEST(TrimsTopP, EpsilonOnlyAbsorbsFloatRounding) {
  auto t = table(kTopPRows);
  trim_top_p(t, 0.7500001f, true);  // within 1e-6 of 0.75: still two
  EXPECT_EQ(t.row(0).size(), 2u);
  t = table(kTopPRows);
  trim_top_p(t, 0.751f, true);  // needs the third
  EXPECT_EQ(row_of(t, 0), (std::vector<ExpertWeight>{{3, 0.5f / 0.875f}, {1, 0.25f / 0.875f}, {7, 0.125f / 0.875f}}));
}

TEST(TrimsTopP, KeepsAtLeastOne) {
  auto t = table({{{3, 0.5f}, {1, 0.5f}}, {{6, 0.25f}}, {}});
  EXPECT_EQ(trim_top_p(t, 0.01f, true), (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(t, table({{{3, 1.0f}}, {{6, 0.25f}}, {}}));  // single row untouched, not renormalised
}

TEST(TrimsTopP, MassIsMeasuredRenormalisedButWeightsKeptWithoutModelNormalisation) {
  // Sum 0.5: e4 alone is half of it.
  auto t = table({{{4, 0.25f}, {5, 0.125f}, {6, 0.125f}}});
  EXPECT_EQ(trim_top_p(t, 0.5f, /*normalize=*/false), std::vector<int>{2});
  EXPECT_EQ(row_of(t, 0), (std::vector<ExpertWeight>{{4, 0.25f}}));
}

TEST(TrimsTopP, OneIsABitIdenticalNoOp) {
  // Weights whose float sum is not 1: any renormalisation would change them.
  const Rows rows{{{0, 0.7f}, {1, 0.2f}, {2, 0.1f}}, {{5, 0.3f}, {3, 0.3f}, {9, 0.1f}}};
  auto t = table(rows);
  EXPECT_EQ(trim_top_p(t, 1.0f, true), (std::vector<int>{0, 0}));
  EXPECT_EQ(t, table(rows));
  // Just below 1 but nothing cut (the last prefix is the whole row): also untouched.
  trim_top_p(t, 0.99999994f, true);
  EXPECT_EQ(t, table(rows));
}

// ---- expert budget -----------------------------------------------------------

// Aggregates: e2 = 0.3125 + 0.5 = 0.8125, e9 = 0.1875 + 0.625 = 0.8125 (tie),
// e5 = 0.5 + 0.25 = 0.75, e7 = 0.25 + 0.375 = 0.625. Ranking: e2, e9, e5, e7.
const Rows kBudgetRows{
    {{5, 0.5f}, {2, 0.3125f}, {9, 0.1875f}},
    {{2, 0.5f}, {7, 0.25f}, {5, 0.25f}},
    {{9, 0.625f}, {7, 0.375f}},
};

TEST(TrimsBudget, KeepsLargestAggregateWeightTiesByLowerId) {
  auto t = table(kBudgetRows);
  EXPECT_EQ(trim_expert_budget(t, 2, true), (std::vector<int>{1, 2, 1}));
  EXPECT_EQ(t, table({{{2, 0.625f}, {9, 0.375f}}, {{2, 1.0f}}, {{9, 1.0f}}}));

  t = table(kBudgetRows);
  EXPECT_EQ(trim_expert_budget(t, 3, true), (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(t, table({kBudgetRows[0], {{2, 0.5f / 0.75f}, {5, 0.25f / 0.75f}}, {{9, 1.0f}}}));
}

TEST(TrimsBudget, TieAtTheCutGoesToLowerIdAndEmptiesAPosition) {
  auto t = table(kBudgetRows);
  EXPECT_EQ(trim_expert_budget(t, 1, true), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(t, table({{{2, 1.0f}}, {{2, 1.0f}}, {}}));  // e9 ties e2 and loses; position 2 has nothing left
  // The batch order does not change which experts survive.
  auto rev = table({kBudgetRows[2], kBudgetRows[1], kBudgetRows[0]});
  trim_expert_budget(rev, 1, true);
  EXPECT_EQ(rev, table({{}, {{2, 1.0f}}, {{2, 1.0f}}}));
}

TEST(TrimsBudget, WithoutModelNormalisationWeightsStay) {
  auto t = table(kBudgetRows);
  trim_expert_budget(t, 2, false);
  EXPECT_EQ(t, table({{{2, 0.3125f}, {9, 0.1875f}}, {{2, 0.5f}}, {{9, 0.625f}}}));
}

TEST(TrimsBudget, BudgetAtLeastTheUnionIsABitIdenticalNoOp) {
  const Rows rows{{{1, 0.7f}, {2, 0.2f}, {3, 0.1f}}, {{3, 0.6f}, {4, 0.3f}}};  // union of 4
  for (int budget : {4, 5, 1000, 0}) {
    auto t = table(rows);
    EXPECT_EQ(trim_expert_budget(t, budget, true), (std::vector<int>{0, 0})) << budget;
    EXPECT_EQ(t, table(rows)) << budget;
  }
}

// ---- drop-cold ---------------------------------------------------------------

TEST(TrimsDropCold, DropsLightMissesOnlyAndRenormalises) {
  const Rows rows{{{4, 0.5f}, {1, 0.25f}, {6, 0.125f}, {3, 0.125f}}};
  std::vector<int32_t> asked;
  const ExpertCachedFn only_e6 = [&](int32_t e) {
    asked.push_back(e);
    return e == 6;
  };
  auto t = table(rows);
  EXPECT_EQ(trim_drop_cold(t, 0.2f, true, only_e6), std::vector<int>{1});
  EXPECT_EQ(row_of(t, 0), (std::vector<ExpertWeight>{{4, 0.5f / 0.875f}, {1, 0.25f / 0.875f}, {6, 0.125f / 0.875f}}));
  EXPECT_EQ(asked, (std::vector<int32_t>{6, 3}));  // heavy experts are not looked up

  t = table(rows);
  trim_drop_cold(t, 0.2f, /*renormalize=*/false, only_e6);
  EXPECT_EQ(row_of(t, 0), (std::vector<ExpertWeight>{{4, 0.5f}, {1, 0.25f}, {6, 0.125f}}));
}

TEST(TrimsDropCold, NeverDropsTopOne) {
  auto t = table({{{8, 0.25f}, {1, 0.25f}, {2, 0.25f}, {3, 0.25f}}, {{5, 0.0625f}}});
  EXPECT_EQ(trim_drop_cold(t, 1.0f, true, kNothingCached), (std::vector<int>{3, 0}));
  EXPECT_EQ(t, table({{{8, 1.0f}}, {{5, 0.0625f}}}));
}

TEST(TrimsDropCold, ComparesTheRenormalisedWeight) {
  // Sum 0.5: e2 and e3 are 0.25 of the mass each although their raw weight is 0.125.
  const Rows rows{{{1, 0.25f}, {2, 0.125f}, {3, 0.125f}}};
  auto t = table(rows);
  EXPECT_EQ(trim_drop_cold(t, 0.2f, true, kNothingCached), std::vector<int>{0});
  EXPECT_EQ(t, table(rows));
  EXPECT_EQ(trim_drop_cold(t, 0.3f, true, kNothingCached), std::vector<int>{2});
  EXPECT_EQ(row_of(t, 0), (std::vector<ExpertWeight>{{1, 1.0f}}));
}

TEST(TrimsDropCold, NeedsAPredicateOnlyWhenOn) {
  auto t = table(kBudgetRows);
  EXPECT_NE(error_of([&] { trim_drop_cold(t, 0.1f, true, {}); }).find("--drop-cold-experts"), std::string::npos);
  EXPECT_EQ(trim_drop_cold(t, 0.0f, true, {}), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(t, table(kBudgetRows));
}

// ---- composition -------------------------------------------------------------

TEST(TrimsCompose, TopKThenTopPThenBudgetThenDropCold) {
  // Router probabilities (8 experts). The model's k is 4; --moe-top-k 3.
  const std::vector<float> probs{
      0.05f, 0.125f, 0.25f, 0.125f, 0.125f, 0.05f, 0.05f, 0.05f,  // p0: e1,e3,e4 tie; k=3 keeps e1,e3
      0.0f,  0.3125f, 0.0f, 0.0f,   0.0f,   0.375f, 0.3125f, 0.0f,  // p1
      0.0f,  0.0f,   0.75f, 0.0f,   0.0f,   0.0f,  0.125f, 0.125f,  // p2: e6,e7 tie
  };
  TrimConfig cfg;
  cfg.top_k = 3;
  cfg.top_p = 0.75f;
  cfg.expert_budget = 3;
  cfg.drop_cold = 0.4f;
  cfg.normalize = true;
  auto t = route_top_k(probs.data(), 3, 8, effective_top_k(cfg, 4, 8), cfg.normalize);
  ASSERT_EQ(t, table({{{2, 0.5f}, {1, 0.25f}, {3, 0.25f}},
                      {{5, 0.375f}, {1, 0.3125f}, {6, 0.3125f}},
                      {{2, 0.75f}, {6, 0.125f}, {7, 0.125f}}}));

  // top-p 0.75: p0 keeps e2,e1 (mass exactly 0.75); p1 needs all three
  // (0.6875 < 0.75); p2 keeps e2 (0.75).
  const float a = 0.5f / 0.75f, b = 0.25f / 0.75f;
  // budget 3: aggregates e2 = a + 1, e1 = b + 0.3125, e5 = 0.375, e6 = 0.3125
  // -> keep e2, e1, e5; p1 loses e6 and renormalises over 0.6875.
  const float c = 0.375f / 0.6875f, d = 0.3125f / 0.6875f;
  // drop-cold 0.4, nothing cached: p0's e1 (b / (a + b) = 1/3) goes, p1's e1
  // (d = 5/11 > 0.4) stays; single rows cannot lose their top-1.
  std::vector<TrimStats> per_pos;
  auto run = t;
  const TrimStats total = apply_trims(run, cfg, kNothingCached, &per_pos);
  EXPECT_EQ(run, table({{{2, 1.0f}}, {{5, c}, {1, d}}, {{2, 1.0f}}}));
  ASSERT_EQ(per_pos.size(), 3u);
  EXPECT_EQ(per_pos[0], (TrimStats{1, 3, 1, 1, 0, 1, 0}));
  EXPECT_EQ(per_pos[1], (TrimStats{1, 3, 2, 0, 1, 0, 0}));
  EXPECT_EQ(per_pos[2], (TrimStats{1, 3, 1, 2, 0, 0, 0}));
  EXPECT_EQ(total, (TrimStats{3, 9, 4, 3, 1, 1, 0}));

  // Same steps by hand give the same table; --drop-no-renorm leaves p0's a.
  auto manual = t;
  trim_top_p(manual, 0.75f, true);
  EXPECT_EQ(manual, table({{{2, a}, {1, b}}, {{5, 0.375f}, {1, 0.3125f}, {6, 0.3125f}}, {{2, 1.0f}}}));
  trim_expert_budget(manual, 3, true);
  EXPECT_EQ(manual, table({{{2, a}, {1, b}}, {{5, c}, {1, d}}, {{2, 1.0f}}}));
  cfg.drop_renorm = false;
  auto no_renorm = t;
  apply_trims(no_renorm, cfg, kNothingCached);
  EXPECT_EQ(no_renorm, table({{{2, a}}, {{5, c}, {1, d}}, {{2, 1.0f}}}));
}

TEST(TrimsCompose, DefaultConfigIsABitIdenticalNoOp) {
  const Rows rows{{{1, 0.7f}, {2, 0.2f}, {3, 0.1f}}, {{3, 0.6f}, {4, 0.3f}}, {}};
  auto t = table(rows);
  const TrimStats s = apply_trims(t, TrimConfig{});
  EXPECT_EQ(t, table(rows));
  EXPECT_EQ(s, (TrimStats{3, 5, 5, 0, 0, 0, 0}));
}

// Counters add up on many generated positions, for every combination of trims,
// and the trimmed table keeps its invariants.
TEST(TrimsCompose, CountersAddUpPerPosition) {
  uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  const int n_pos = 64, n_expert = 16, k = 4;
  std::vector<float> probs(static_cast<size_t>(n_pos) * n_expert);
  for (auto& p : probs) p = static_cast<float>(next() >> 8) / 16777216.0f;
  for (float top_p : {1.0f, 0.6f, 0.3f})
    for (int budget : {0, 3, 9})
      for (float cold : {0.0f, 0.2f}) {
        TrimConfig cfg;
        cfg.top_p = top_p;
        cfg.expert_budget = budget;
        cfg.drop_cold = cold;
        auto t = route_top_k(probs.data(), n_pos, n_expert, k, true);
        std::vector<TrimStats> per_pos;
        const TrimStats total =
            apply_trims(t, cfg, [](int32_t e) { return e % 3 == 0; }, &per_pos);
        TrimStats sum;
        for (int p = 0; p < n_pos; ++p) {
          const auto& s = per_pos[p];
          EXPECT_EQ(s.routed, k);
          EXPECT_EQ(s.routed, s.kept + s.dropped_by_top_p + s.dropped_by_budget + s.dropped_by_cold);
          EXPECT_EQ(s.kept, static_cast<int64_t>(t.row(p).size()));
          EXPECT_EQ(s.positions_emptied, s.kept == 0 ? 1 : 0);
          if (budget == 0) { EXPECT_GE(s.kept, 1); }
          double w = 0.0;
          for (const auto& e : t.row(p)) w += e.weight;
          if (s.kept > 0) { EXPECT_NEAR(w, 1.0, 1e-6); }
          sum += s;
        }
        EXPECT_EQ(sum, total);
        if (budget > 0) { EXPECT_LE(expert_union(t).size(), static_cast<size_t>(budget)); }
        if (top_p < 1.0f || budget > 0) {  // the settings do bite on this data
          EXPECT_GT(total.dropped(), 0);
        }
        // Rows stay valid: rebuilding them through the checked setter succeeds.
        Rows rows;
        for (int p = 0; p < n_pos; ++p) rows.push_back(row_of(t, p));
        EXPECT_EQ(table(rows).total_entries(), total.kept);
      }
}

// ---- union -------------------------------------------------------------------

TEST(TrimsUnion, DistinctExpertsWithTheirUses) {
  const auto t = table({{{5, 0.5f}, {2, 0.3f}}, {{2, 0.6f}, {9, 0.4f}}, {}});
  const auto u = expert_union(t);
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u[0].expert, 2);
  EXPECT_EQ(u[0].total_weight, static_cast<double>(0.3f) + static_cast<double>(0.6f));
  ASSERT_EQ(u[0].uses.size(), 2u);
  EXPECT_EQ(u[0].uses[0].position, 0);
  EXPECT_EQ(u[0].uses[0].slot, 1);
  EXPECT_EQ(u[0].uses[0].weight, 0.3f);
  EXPECT_EQ(u[0].uses[1].position, 1);
  EXPECT_EQ(u[0].uses[1].slot, 0);
  EXPECT_EQ(u[0].uses[1].weight, 0.6f);
  EXPECT_EQ(u[1].expert, 5);
  EXPECT_EQ(u[1].total_weight, static_cast<double>(0.5f));
  ASSERT_EQ(u[1].uses.size(), 1u);
  EXPECT_EQ(u[2].expert, 9);
  EXPECT_EQ(u[2].uses[0].position, 1);
  EXPECT_EQ(u[2].uses[0].slot, 1);
  EXPECT_TRUE(expert_union(RoutingTable(4, 2)).empty());
}

// ---- flags and environment -----------------------------------------------------

using Env = std::map<std::string, std::string>;

TrimConfig parse(const std::string& args, const Env& env) {
  CLI::App app;
  TrimConfig cfg;
  const auto flags = cli::add_trim_flags(&app, cfg);
  app.parse(args, /*program_name_included=*/false);
  resolve_trim_config(cfg, flags.given(), [&env](const char* key) -> std::optional<EnvSetting> {
    const auto it = env.find(key);
    if (it == env.end()) return std::nullopt;
    return EnvSetting{it->first, it->second};
  });
  return cfg;
}

TEST(TrimsFlags, DefaultsAreOff) {
  const TrimConfig cfg = parse("", {});
  EXPECT_EQ(cfg.top_k, 0);
  EXPECT_EQ(cfg.top_p, 1.0f);
  EXPECT_EQ(cfg.expert_budget, 0);
  EXPECT_EQ(cfg.drop_cold, 0.0f);
  EXPECT_TRUE(cfg.drop_renorm);
  EXPECT_FALSE(cfg.any_table_trim());
}

TEST(TrimsFlags, FlagsSetTheConfig) {
  const TrimConfig cfg =
      parse("--moe-top-k 2 --moe-top-p 0.9 --expert-budget 12 --drop-cold-experts 0.05 --drop-no-renorm", {});
  EXPECT_EQ(cfg.top_k, 2);
  EXPECT_EQ(cfg.top_p, 0.9f);
  EXPECT_EQ(cfg.expert_budget, 12);
  EXPECT_EQ(cfg.drop_cold, 0.05f);
  EXPECT_FALSE(cfg.drop_renorm);
}

TEST(TrimsFlags, EnvironmentFillsOnlyFlagsNotGiven) {
  const Env env{{"SLUICE_TOPK", "4"}, {"SLUICE_TOPP", " 0.5 "}, {"SLUICE_EXPERT_BUDGET", "16"}};
  TrimConfig cfg = parse("", env);
  EXPECT_EQ(cfg.top_k, 4);
  EXPECT_EQ(cfg.top_p, 0.5f);
  EXPECT_EQ(cfg.expert_budget, 16);
  cfg = parse("--moe-top-k 2 --expert-budget 3", env);
  EXPECT_EQ(cfg.top_k, 2);
  EXPECT_EQ(cfg.top_p, 0.5f);
  EXPECT_EQ(cfg.expert_budget, 3);
  // A variable behind a given flag is not even parsed; an empty one is unset.
  cfg = parse("--moe-top-p 0.8", {{"SLUICE_TOPP", "garbage"}, {"SLUICE_TOPK", ""}});
  EXPECT_EQ(cfg.top_p, 0.8f);
  EXPECT_EQ(cfg.top_k, 0);
}

TEST(TrimsFlags, EnvironmentErrorsNameTheVariableAndValue) {
  auto err = [](const Env& env) { return error_of([&] { parse("", env); }); };
  EXPECT_EQ(err({{"SLUICE_TOPP", "1.5"}}), "SLUICE_TOPP=1.5: MoE top-p must be in (0, 1] (got 1.5)");
  EXPECT_EQ(err({{"SLUICE_TOPP", "0"}}), "SLUICE_TOPP=0: MoE top-p must be in (0, 1] (got 0)");
  EXPECT_EQ(err({{"SLUICE_TOPP", "abc"}}), "SLUICE_TOPP=abc: not a number");
  EXPECT_EQ(err({{"SLUICE_TOPP", "nan"}}).substr(0, 16), "SLUICE_TOPP=nan:");
  EXPECT_EQ(err({{"SLUICE_TOPK", "3x"}}), "SLUICE_TOPK=3x: not an integer");
  EXPECT_EQ(err({{"SLUICE_TOPK", "0"}}), "SLUICE_TOPK=0: MoE top-k must be >= 1 (got 0)");
  EXPECT_EQ(err({{"SLUICE_EXPERT_BUDGET", "0"}}), "SLUICE_EXPERT_BUDGET=0: expert budget must be >= 1 (got 0)");
  EXPECT_EQ(err({{"SLUICE_EXPERT_BUDGET", "99999999999"}}), "SLUICE_EXPERT_BUDGET=99999999999: not an integer");
}

// The CLI reads SLUICE_X, else the bare X (the seed's names); an empty value
// is unset; the setting names the variable read, for messages.
TEST(TrimsFlags, CliReadsThePrefixedNameThenTheBareOne) {
  ::unsetenv("SLUICE_TOPK");
  ::setenv("TOPK", "3", 1);
  std::optional<EnvSetting> e = cli::read_trim_env(kEnvTopK);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->name, "TOPK");
  EXPECT_EQ(e->value, "3");
  ::setenv("SLUICE_TOPK", "2", 1);
  e = cli::read_trim_env(kEnvTopK);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->name, "SLUICE_TOPK");
  EXPECT_EQ(e->value, "2");
  ::setenv("SLUICE_TOPK", " ", 1);
  EXPECT_EQ(cli::read_trim_env(kEnvTopK)->name, "TOPK");
  ::unsetenv("SLUICE_TOPK");
  ::unsetenv("TOPK");
  EXPECT_FALSE(cli::read_trim_env(kEnvTopK));
}

TEST(TrimsFlags, FlagErrorsNameTheFlag) {
  auto err = [](const std::string& args) { return error_of([&] { parse(args, {}); }); };
  EXPECT_EQ(err("--moe-top-p 0"), "--moe-top-p: MoE top-p must be in (0, 1] (got 0)");
  EXPECT_EQ(err("--moe-top-p 1.01").substr(0, 12), "--moe-top-p:");
  EXPECT_EQ(err("--moe-top-k 0"), "--moe-top-k: MoE top-k must be >= 1 (got 0)");
  EXPECT_EQ(err("--expert-budget 0"), "--expert-budget: expert budget must be >= 1 (got 0)");
  EXPECT_EQ(err("--drop-cold-experts 1.5"), "--drop-cold-experts: threshold must be in [0, 1] (got 1.5)");
  EXPECT_EQ(err("--drop-cold-experts=-0.1").substr(0, 20), "--drop-cold-experts:");
  EXPECT_EQ(err("--moe-top-p 1"), "");
}

TEST(TrimsFlags, ValidateAcceptsOffValuesBuiltInCode) {
  EXPECT_NO_THROW(validate_trim_config(TrimConfig{}));
  TrimConfig cfg;
  cfg.expert_budget = -1;
  EXPECT_NE(error_of([&] { validate_trim_config(cfg); }).find("--expert-budget"), std::string::npos);
}

}  // namespace
}  // namespace sluice::moe
