#include "util/decimal.h"

#include <cmath>
#include <cstdio>

namespace sluice {

double round_to(double v, int decimals) {
  if (!std::isfinite(v)) return v;
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

std::string fixed(double v, int decimals) {
  char buf[352];  // DBL_MAX in "%f" is 309 digits, plus the decimals kept below
  std::snprintf(buf, sizeof buf, "%.*f", decimals < 0 ? 0 : decimals > 30 ? 30 : decimals, v);
  return buf;
}

}  // namespace sluice
