// tests/serve/slots_choices.mjs with the latest `openai` npm package, when node
// and the package are installed: n > 1 choices (whole and streamed) and
// /slots save, then a restart (a second server on the same --slot-save-path)
// and restore, whose continuation must equal the never-stopped server's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "serve_test_support.h"
#include "test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

struct SlotDir {
  std::string path = ::testing::TempDir() + "/node_slots_" + std::to_string(::getpid());
  SlotDir() { std::filesystem::create_directories(path); }
  ~SlotDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// Runs the script's PHASE against a fresh two-slot server on DIR.
std::string run_phase(const std::string& phase, const std::string& dir, int* rc) {
  server::ServerConfig c = plain_config();
  c.slot_save_path = dir;
  // Chat (n = 2 there too) renders the messages' contents joined: a prompt for the stories model.
  c.chat_renderer = [](const nlohmann::json& messages, const nlohmann::json&, bool) {
    std::string s;
    for (const nlohmann::json& m : messages) s += m["content"].get<std::string>();
    return s;
  };
  LiveServer ls(c, 2);
  const std::string scripts = source_path("tests/serve");
  return run_cmd("cd '" + scripts + "' && timeout 120 node slots_choices.mjs http://127.0.0.1:" +
                     std::to_string(ls.port) + " " + phase + " '" + dir + "' 2>&1",
                 rc);
}

TEST(ServeNodeSlots, OpenAiClientSavesRestoresAndAsksForSeveralChoices) {
  const std::string scripts = source_path("tests/serve");
  int rc = 0;
  run_cmd("cd '" + scripts + "' && node -e \"import('openai').then(()=>process.exit(0),()=>process.exit(1))\" 2>/dev/null",
          &rc);
  if (rc != 0) GTEST_SKIP() << "node or the openai npm package is missing (cd tests/serve && npm install openai)";
  SlotDir dir;
  const std::string saved = run_phase("save", dir.path, &rc);
  ASSERT_EQ(rc, 0) << saved;
  ASSERT_NE(saved.find("SLOTS_SAVE_OK"), std::string::npos) << saved;
  const std::string restored = run_phase("restore", dir.path, &rc);
  EXPECT_EQ(rc, 0) << restored;
  EXPECT_NE(restored.find("SLOTS_RESTORE_OK"), std::string::npos) << restored;
}

}  // namespace
}  // namespace sluice::test
