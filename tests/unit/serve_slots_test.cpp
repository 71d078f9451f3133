// `sluice serve`'s slot endpoints: GET /slots, POST /slots/{id}?action=save|restore
// under --slot-save-path. Save, stop the server, start another, restore: the
// prompt is then served from the restored state (its tokens count as cached)
// and the greedy continuation equals the never-stopped server's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "serve_test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

using json = nlohmann::json;

std::pair<int, json> post(const LiveServer& ls, const std::string& path, const json& body) {
  auto r = ls.client().Post(path.c_str(), body.dump(), "application/json");
  EXPECT_TRUE(r) << path;
  if (!r) return {0, json()};
  return {r->status, json::parse(r->body, nullptr, false)};
}

json slots(const LiveServer& ls) {
  auto r = ls.client().Get("/slots");
  EXPECT_TRUE(r && r->status == 200);
  return r ? json::parse(r->body, nullptr, false) : json();
}

struct TempDir {
  std::string path = ::testing::TempDir() + "/slots_" + std::to_string(::getpid());
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

server::ServerConfig with_dir(const std::string& dir) {
  server::ServerConfig c = plain_config();
  c.slot_save_path = dir;
  return c;
}

const char* kPrompt = "Once upon a time, there was a little girl named Lily. She loved to play";

TEST(ServeSlots, SaveRestartRestoreContinuesAsNeverStopping) {
  TempDir dir;
  const json first = {{"prompt", kPrompt}, {"max_tokens", 1}};
  const json cont = {{"prompt", kPrompt}, {"max_tokens", 12}};
  int saved = 0;
  json never_stopped;
  {
    LiveServer a(with_dir(dir.path));
    ASSERT_EQ(post(a, "/v1/completions", first).first, 200);
    const auto [st, j] = post(a, "/slots/0?action=save", {{"filename", "lily.slot"}});
    ASSERT_EQ(st, 200) << j;
    saved = j["n_saved"].get<int>();
    EXPECT_GT(saved, 0);
    EXPECT_GT(j["n_written"].get<int64_t>(), 0);
    EXPECT_EQ(slots(a)[0]["n_past"], saved);
    const auto [st2, c] = post(a, "/v1/completions", cont);
    ASSERT_EQ(st2, 200);
    never_stopped = c;
  }
  LiveServer b(with_dir(dir.path));
  EXPECT_EQ(slots(b)[0]["n_past"], 0);
  const auto [st, j] = post(b, "/slots/0?action=restore", {{"filename", "lily.slot"}});
  ASSERT_EQ(st, 200) << j;
  EXPECT_EQ(j["n_restored"], saved);
  EXPECT_EQ(slots(b)[0]["n_past"], saved);
  EXPECT_EQ(slots(b)[0]["is_processing"], false);
  const auto [st2, restored] = post(b, "/v1/completions", cont);
  ASSERT_EQ(st2, 200);
  EXPECT_EQ(restored["choices"][0]["text"], never_stopped["choices"][0]["text"]);
  // The restored state served the prompt, as the never-stopped slot did.
  EXPECT_EQ(restored["usage"]["prompt_tokens_details"]["cached_tokens"],
            never_stopped["usage"]["prompt_tokens_details"]["cached_tokens"]);
  EXPECT_GT(restored["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
}

TEST(ServeSlots, BadActionsAreClearErrors) {
  {
    LiveServer off(plain_config());
    const auto [st, j] = post(off, "/slots/0?action=save", {{"filename", "x"}});
    EXPECT_EQ(st, 501);
    EXPECT_NE(j["error"]["message"].get<std::string>().find("--slot-save-path"), std::string::npos) << j;
  }
  TempDir dir;
  LiveServer ls(with_dir(dir.path));
  for (const char* name : {"../x", "a/b", "..", ""}) {
    const auto [st, j] = post(ls, "/slots/0?action=save", {{"filename", name}});
    EXPECT_EQ(st, 400) << name;
    EXPECT_NE(j["error"]["message"].get<std::string>().find("filename"), std::string::npos) << j;
  }
  EXPECT_EQ(post(ls, "/slots/0?action=drop", {{"filename", "x"}}).first, 400);
  EXPECT_EQ(post(ls, "/slots/7?action=save", {{"filename", "x"}}).first, 400);
  EXPECT_EQ(post(ls, "/slots/0?action=restore", {{"filename", "missing"}}).first, 404);
  // A file that is not a slot file, and one cut short: 400, and the slot serves on.
  {
    std::ofstream(dir.path + "/junk") << "not a slot";
  }
  auto [st, j] = post(ls, "/slots/0?action=restore", {{"filename", "junk"}});
  EXPECT_EQ(st, 400) << j;
  ASSERT_EQ(post(ls, "/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 1}}).first, 200);
  ASSERT_EQ(post(ls, "/slots/0?action=save", {{"filename", "good"}}).first, 200);
  const auto size = std::filesystem::file_size(dir.path + "/good");
  std::filesystem::resize_file(dir.path + "/good", size - 10);
  std::tie(st, j) = post(ls, "/slots/0?action=restore", {{"filename", "good"}});
  EXPECT_EQ(st, 400) << j;
  EXPECT_NE(j["error"]["message"].get<std::string>().find("truncated"), std::string::npos) << j;
  EXPECT_EQ(slots(ls)[0]["n_past"], 0);  // emptied, not half-restored
  EXPECT_EQ(post(ls, "/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 2}}).first, 200);
}

}  // namespace
}  // namespace sluice::test
