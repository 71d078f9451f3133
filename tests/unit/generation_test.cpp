// Sampling and stopping as users expect: stop strings never shown (the
// stream itself: ServeTextStream.*), -n -1 runs to a clean context-full
// stop, a random seed is printed and reproduces.
#include <gtest/gtest.h>

#include <regex>

#include "test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

std::string model() { return source_path("models/stories-moe-8x-q8_0.gguf"); }

TEST(GenerationCli, UnlimitedGenerationStopsCleanlyAtAFullContext) {
  const CliResult r = run_sluice("run -m " + model() + " -p 'Once upon a time' -n -1 -c 40");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("sluice: context full (40 positions): generation stopped"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("error"), std::string::npos) << r.out;
}

TEST(GenerationCli, StopStringEndsTheOutputBeforeIt) {
  const CliResult r = run_sluice("run -m " + model() + " -p 'Once upon a time' -n 40 --stop Lily", "2>/dev/null");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "Once upon a time, there was a little girl named \n");
}

TEST(GenerationCli, RandomSeedIsPrintedAndReproduces) {
  const std::string args = "run -m " + model() + " -p 'Once upon a time' -n 24 --temp 1.0";
  const CliResult first = run_sluice(args, "2>&1");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(first.out, m, std::regex("sluice: seed ([0-9]+)"))) << first.out;
  const CliResult again = run_sluice(args + " -s " + m[1].str(), "2>/dev/null");
  const CliResult again2 = run_sluice(args + " -s " + m[1].str(), "2>/dev/null");
  EXPECT_EQ(again.out, again2.out);
  // The first run's text (stdout lines before the summary) is the seeded run's text.
  EXPECT_NE(first.out.find(again.out.substr(0, again.out.size() - 1)), std::string::npos);
  EXPECT_NE(run_sluice(args + " -s -2").status, 0);
}

}  // namespace
}  // namespace sluice::test
