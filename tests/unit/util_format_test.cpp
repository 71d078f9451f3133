// util: CSV quoting (csv.h), decimal rounding and fixed places (decimal.h),
// seconds_since (clock.h) on fixed time points.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "util/clock.h"
#include "util/csv.h"
#include "util/decimal.h"

namespace sluice {
namespace SLUICE_TEST_FILE {

TEST(UtilCsv, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(csv_field("plain.gguf"), "plain.gguf");
  EXPECT_EQ(csv_field(""), "");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("cr\r"), "\"cr\r\"");
  EXPECT_EQ(csv_field(" spaced "), " spaced ");  // RFC 4180 keeps spaces as data
  EXPECT_EQ(csv_join({"m,1.gguf", "2", "x\"y"}), "\"m,1.gguf\",2,\"x\"\"y\"");
  const std::vector<std::string> one = {"only"};
  EXPECT_EQ(csv_join(one), "only");
  EXPECT_EQ(csv_join(std::vector<std::string>{}), "");
  EXPECT_EQ(csv_join({"", ""}), ",");
}

TEST(UtilDecimal, RoundToAndFixed) {
  EXPECT_EQ(round_to(2.25004, 4), 2.25);
  EXPECT_EQ(round_to(2825.63, 1), 2825.6);
  EXPECT_EQ(round_to(-1.5, 0), -2.0);  // half away from zero
  EXPECT_EQ(round_to(9001.999, 2), 9002.0);
  EXPECT_TRUE(std::isnan(round_to(std::nan(""), 2)));
  EXPECT_EQ(round_to(std::numeric_limits<double>::infinity(), 2),
            std::numeric_limits<double>::infinity());
  EXPECT_EQ(fixed(2.5, 4), "2.5000");
  EXPECT_EQ(fixed(2831.1234, 2), "2831.12");
  EXPECT_EQ(fixed(0.05, 0), "0");
  EXPECT_EQ(fixed(1e300, 1).size(), 303u);  // no truncation of large values
}

TEST(UtilClock, SecondsSinceFixedPoints) {
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::seconds(100);
  EXPECT_EQ(seconds_since(t0, t0), 0.0);
  EXPECT_EQ(seconds_since(t0, t0 + std::chrono::milliseconds(1500)), 1.5);
  EXPECT_EQ(seconds_since(t0, t0 + std::chrono::microseconds(250)), 0.00025);
  EXPECT_EQ(seconds_since(t0 + std::chrono::seconds(2), t0), -2.0);
  const auto before = std::chrono::steady_clock::now();
  EXPECT_GE(seconds_since(before), 0.0);  // the default is now, on a monotonic clock
}

}  // namespace
}  // namespace sluice
