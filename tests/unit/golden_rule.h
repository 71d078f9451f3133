// The pass rule of shared/golden/check_golden.py (and tests/golden/): mean
// |delta|, fraction of positions over the per-position limit, argmax agreement.
// Shared by the suites over ../shared/golden and tests/golden.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sluice::test {

struct GoldenResult {
  double mean_abs = 0, std = 0, worst = 0, frac_over = 0, argmax_agree = 0;
};

inline GoldenResult compare(const std::vector<float>& ref, const std::vector<float>& got, int n_tokens, int n_vocab,
                            double pos_limit) {
  GoldenResult r;
  double sum = 0, sum2 = 0, sum_abs = 0;
  int over = 0, agree = 0;
  for (int t = 0; t < n_tokens; ++t) {
    double pos_max = 0;
    int ra = 0, ga = 0;
    for (int v = 0; v < n_vocab; ++v) {
      const size_t i = static_cast<size_t>(t) * n_vocab + v;
      const double d = std::fabs(static_cast<double>(ref[i]) - got[i]);
      sum_abs += d;
      pos_max = std::max(pos_max, d);
      sum += ref[i];
      sum2 += static_cast<double>(ref[i]) * ref[i];
      if (ref[i] > ref[static_cast<size_t>(t) * n_vocab + ra]) ra = v;
      if (got[i] > got[static_cast<size_t>(t) * n_vocab + ga]) ga = v;
    }
    r.worst = std::max(r.worst, pos_max);
    if (pos_max > pos_limit) ++over;
    if (ra == ga) ++agree;
  }
  const double n = static_cast<double>(n_tokens) * n_vocab;
  r.mean_abs = sum_abs / n;
  r.std = std::sqrt(sum2 / n - (sum / n) * (sum / n));
  r.frac_over = static_cast<double>(over) / n_tokens;
  r.argmax_agree = static_cast<double>(agree) / n_tokens;
  return r;
}

// Which of the rule's logit criteria (1)-(3) `r` breaks under `tol` (a
// NAME.json "tolerance"); "" when it passes.
inline std::string golden_violations(const GoldenResult& r, const nlohmann::json& tol) {
  std::string why;
  if (r.mean_abs > tol["mean_abs_diff"].get<double>()) why += " mean|d|=" + std::to_string(r.mean_abs);
  if (r.frac_over > tol["max_fraction_positions_exceeding"].get<double>() + 1e-12)
    why += " positions over=" + std::to_string(r.frac_over);
  if (r.argmax_agree < tol["argmax_agreement_min"].get<double>())
    why += " argmax agreement=" + std::to_string(r.argmax_agree);
  return why;
}

}  // namespace sluice::test
