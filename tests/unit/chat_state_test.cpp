// `sluice chat --save FILE / --load FILE`: the state written when a chat ends
// is restored before the next chat's first turn (its tokens are not
// evaluated again) and the greedy answer is the same; a file for another
// context is refused with a message naming -c; the model itself is never
// overwritten by --save.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

std::string stories() { return source_path("models/stories-moe-8x-q8_0.gguf"); }

// The chat's answer: stdout without the banner lines.
TEST(ChatState, SaveThenLoadRestoresTheConversationState) {
  const std::string file = ::testing::TempDir() + "/chat_state_" + std::to_string(::getpid()) + ".slot";
  const std::string input = file + ".in";
  {
    FILE* f = std::fopen(input.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("Hello there\n", f);
    std::fclose(f);
  }
  const std::string base = "chat -m " + stories() + " -n 6 --temp 0 --system 'You are a storyteller.'";
  const CliResult saved = run_sluice(base + " --save " + file + " < " + input, "2>/dev/null");
  ASSERT_EQ(saved.status, 0) << saved.out;
  const CliResult saved_log = run_sluice(base + " --save " + file + " < " + input, "2>&1 >/dev/null");
  EXPECT_NE(saved_log.out.find("sluice: saved "), std::string::npos) << saved_log.out;
  const CliResult loaded = run_sluice(base + " --load " + file + " < " + input, "2>/dev/null");
  ASSERT_EQ(loaded.status, 0) << loaded.out;
  EXPECT_EQ(loaded.out, saved.out);  // the same greedy answer from the restored state
  const CliResult loaded_log = run_sluice(base + " --load " + file + " < " + input, "2>&1 >/dev/null");
  EXPECT_NE(loaded_log.out.find("sluice: restored "), std::string::npos) << loaded_log.out;
  // The saved state is the one reported as saved: same token count restored.
  const size_t at = saved_log.out.find("saved "), at2 = loaded_log.out.find("restored ");
  ASSERT_NE(at, std::string::npos);
  ASSERT_NE(at2, std::string::npos);
  EXPECT_EQ(std::stoi(saved_log.out.substr(at + 6)), std::stoi(loaded_log.out.substr(at2 + 9)));
  EXPECT_GT(std::stoi(saved_log.out.substr(at + 6)), 5);

  const CliResult other_ctx = run_sluice("chat -m " + stories() + " -c 256 --load " + file + " </dev/null");
  EXPECT_NE(other_ctx.status, 0);
  EXPECT_NE(other_ctx.out.find("context of 512 tokens; it is loaded now with 256 (-c)"), std::string::npos)
      << other_ctx.out;
  std::remove(file.c_str());
  std::remove(input.c_str());
}

}  // namespace
}  // namespace sluice::test
