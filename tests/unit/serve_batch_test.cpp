// `sluice serve --parallel`: requests run concurrently in the model's slots,
// batched step by step. Greedy answers are the solo answers; streams overlap
// (asserted by the order of events, never by durations); a client that goes
// away frees its slot; a full queue is a 429 with a JSON error.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "serve_test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

using json = nlohmann::json;

constexpr int kSlots = 4;

json completion(const LiveServer& ls, const json& body) {
  auto res = ls.client().Post("/v1/completions", body.dump(), "application/json");
  EXPECT_TRUE(res);
  if (!res) return json();
  EXPECT_EQ(res->status, 200) << res->body;
  return json::parse(res->body, nullptr, false);
}

// Events of concurrent streams, in the order the test's threads saw them.
struct EventLog {
  std::mutex mu;
  std::vector<std::string> events;
  void add(const std::string& e) {
    std::lock_guard lk(mu);
    events.push_back(e);
  }
  ptrdiff_t index(const std::string& e) {
    std::lock_guard lk(mu);
    const auto it = std::find(events.begin(), events.end(), e);
    return it == events.end() ? -1 : it - events.begin();
  }
};

// A streaming completion whose SSE bytes go through `on_data`; returns the
// concatenated text of its chunks (read from the whole body afterwards).
std::string stream(const LiveServer& ls, json body,
                   const std::function<void(const std::string&)>& on_data) {
  body["stream"] = true;
  std::string raw;
  httplib::Client c = ls.client();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    raw.append(data, n);
    on_data(raw);
    return true;
  };
  auto res = c.send(req);
  EXPECT_TRUE(res);
  if (!res) return "";
  EXPECT_EQ(res->status, 200);
  std::string text;
  size_t pos = 0;
  while ((pos = raw.find("data: {", pos)) != std::string::npos) {
    const size_t end = raw.find("\n\n", pos);
    const json j = json::parse(raw.substr(pos + 6, end - pos - 6));
    text += j["choices"][0]["text"].get<std::string>();
    pos = end;
  }
  return text;
}

TEST(ServeBatch, FourConcurrentGreedyRequestsGiveTheirSoloTextsAndOverlap) {
  LiveServer ls(plain_config(), kSlots);
  EXPECT_EQ(metric(ls, "sluice_slots"), kSlots);
  // Request 0 runs long, the others short; every prompt differs.
  const std::vector<json> bodies = {
      {{"prompt", "Once upon a time"}, {"max_tokens", 160}},
      {{"prompt", "The little dog"}, {"max_tokens", 12}},
      {{"prompt", "One day, a girl named Lily"}, {"max_tokens", 12}},
      {{"prompt", "Tom and his mom went to the park"}, {"max_tokens", 12}},
  };
  std::vector<std::string> solo;
  for (const json& b : bodies) solo.push_back(completion(ls, b)["choices"][0]["text"]);
  const json long_one = completion(ls, bodies[0]);
  ASSERT_GE(long_one["usage"]["completion_tokens"].get<int>(), 100)
      << "request 0 must run long for the overlap";
  const double steps_before = metric(ls, "sluice_batch_steps_total");
  const double seqs_before = metric(ls, "sluice_batch_sequences_total");

  EventLog log;
  std::vector<std::string> got(bodies.size());
  std::vector<std::thread> threads;
  std::mutex start_mu;
  std::condition_variable start_cv;
  bool first_token = false;
  // Request 0 starts first; the others start once its first token arrived,
  // so all four are in slots at once while request 0 still has ~150 tokens to go.
  threads.emplace_back([&] {
    got[0] = stream(ls, bodies[0], [&](const std::string& raw) {
      if (raw.find("data: {") == std::string::npos || first_token) return;
      log.add("first 0");
      std::lock_guard lk(start_mu);
      first_token = true;
      start_cv.notify_all();
    });
    log.add("end 0");
  });
  {
    std::unique_lock lk(start_mu);
    start_cv.wait(lk, [&] { return first_token; });
  }
  for (size_t i = 1; i < bodies.size(); ++i)
    threads.emplace_back([&, i] {
      bool seen = false;
      got[i] = stream(ls, bodies[i], [&](const std::string& raw) {
        if (!seen && raw.find("data: {") != std::string::npos)
          seen = true, log.add("first " + std::to_string(i));
      });
      log.add("end " + std::to_string(i));
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < bodies.size(); ++i)
    EXPECT_EQ(got[i], solo[i]) << "request " << i << " batched vs alone";
  const ptrdiff_t first3 = log.index("first 3"), end0 = log.index("end 0");
  ASSERT_GE(first3, 0);
  ASSERT_GE(end0, 0);
  EXPECT_LT(first3, end0)
      << "the 4th stream's first token came after the 1st stream ended: no overlap";
  // Some steps evaluated several sequences at once.
  const double steps = metric(ls, "sluice_batch_steps_total") - steps_before;
  const double seqs = metric(ls, "sluice_batch_sequences_total") - seqs_before;
  EXPECT_GT(seqs, steps);
  EXPECT_LE(metric(ls, "sluice_batch_experts_union_total"),
            metric(ls, "sluice_batch_experts_per_sequence_total"));
  EXPECT_GT(metric(ls, "sluice_batch_expert_bytes_saved_total"), 0);
  EXPECT_EQ(metric(ls, "sluice_slots_busy"), 0);
}

TEST(ServeBatch, AClientGoneMidStreamFreesItsSlot) {
  LiveServer ls(plain_config(), 2);
  const int fd = open_long_stream(ls);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(metric(ls, "sluice_slots_busy"), 1);
  EXPECT_EQ(metric(ls, "sluice_slots_free"), 1);
  ::close(fd);  // with data unread: a reset, seen by the server's next write
  ASSERT_TRUE(wait_for_metric(ls, "sluice_requests_cancelled_total", 1));
  EXPECT_EQ(metric(ls, "sluice_slots_busy"), 0);
  EXPECT_EQ(metric(ls, "sluice_slots_free"), 2);
  // Both slots serve again.
  EXPECT_EQ(completion(ls, {{"prompt", "Once upon a time"},
                            {"max_tokens", 3}})["usage"]["completion_tokens"],
            3);
}

TEST(ServeBatch, AFullQueueIs429WithAJsonError) {
  server::ServerConfig cfg = plain_config();
  cfg.max_queue = 0;  // only the slot: a second request while it runs is refused
  LiveServer ls(cfg, 1);
  const int fd = open_long_stream(ls);
  ASSERT_GE(fd, 0);
  for (bool streamed : {false, true}) {
    json body = {{"prompt", "The little dog"}, {"max_tokens", 3}, {"stream", streamed}};
    auto res = ls.client().Post("/v1/completions", body.dump(), "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 429);
    const json j = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << res->body;
    EXPECT_EQ(j["error"]["code"], 429);
    EXPECT_EQ(j["error"]["type"], "rate_limit_error");
    EXPECT_NE(j["error"]["message"].get<std::string>().find("--max-queue"), std::string::npos)
        << res->body;
  }
  EXPECT_EQ(metric(ls, "sluice_requests_rejected_total"), 2);
  ::close(fd);
  ASSERT_TRUE(wait_for_metric(ls, "sluice_requests_cancelled_total", 1));
  EXPECT_EQ(completion(ls, {{"prompt", "The little dog"},
                            {"max_tokens", 3}})["usage"]["completion_tokens"],
            3);
}

// The other APIs queue before they answer too: a full queue is a real 429
// status (never a 200 whose stream then carries an error), in each API's
// own error shape.
TEST(ServeBatch, AFullQueueIs429BeforeTheStreamOnEveryApi) {
  server::ServerConfig cfg = plain_config();
  cfg.max_queue = 0;
  cfg.chat_renderer = [](const json& messages, const json&, bool) {
    std::string s;
    for (const json& m : messages) s += m["content"].get<std::string>();
    return s;
  };
  LiveServer ls(cfg, 1);
  const int fd = open_long_stream(ls);
  ASSERT_GE(fd, 0);
  const json messages = {{{"role", "user"}, {"content", "The little dog"}}};
  int rejected = 0;
  for (bool streamed : {false, true}) {
    struct Case {
      const char* path;
      json body;
      bool anthropic;
    };
    const Case cases[] = {
        {"/v1/messages", {{"model", "m"}, {"max_tokens", 3}, {"messages", messages}, {"stream", streamed}}, true},
        {"/v1/responses", {{"input", "The little dog"}, {"max_output_tokens", 3}, {"stream", streamed}}, false},
        {"/completion", {{"prompt", "The little dog"}, {"n_predict", 3}, {"stream", streamed}}, false},
    };
    for (const Case& c : cases) {
      auto res = ls.client().Post(c.path, c.body.dump(), "application/json");
      ASSERT_TRUE(res) << c.path;
      EXPECT_EQ(res->status, 429) << c.path << " stream=" << streamed << ": " << res->body;
      const json j = json::parse(res->body, nullptr, false);
      ASSERT_TRUE(j.is_object()) << c.path << ": " << res->body;
      if (c.anthropic) {
        EXPECT_EQ(j["type"], "error") << res->body;
      } else {
        EXPECT_EQ(j["error"]["code"], 429) << res->body;
      }
      EXPECT_EQ(j["error"]["type"], "rate_limit_error") << res->body;
      EXPECT_NE(j["error"]["message"].get<std::string>().find("--max-queue"), std::string::npos) << res->body;
      ++rejected;
    }
  }
  EXPECT_EQ(metric(ls, "sluice_requests_rejected_total"), rejected);
  ::close(fd);
  ASSERT_TRUE(wait_for_metric(ls, "sluice_requests_cancelled_total", 1));
  // Served again once the slot is free.
  auto ok = ls.client().Post("/v1/messages",
                             json({{"model", "m"}, {"max_tokens", 3}, {"messages", messages}}).dump(),
                             "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

// n > 1: the choices share one evaluation of the prompt (the others start
// from a copy of the first's state: every prompt token of theirs counts as
// cached), greedy choices equal the n = 1 answer, sampled ones follow the seed.
TEST(ServeBatch, NChoicesShareThePromptEvaluation) {
  LiveServer ls(plain_config(), 3);
  const std::string prompt = "One day, a little bird flew over the river and saw";
  const json one = completion(ls, {{"prompt", prompt}, {"max_tokens", 10}});
  const std::string solo = one["choices"][0]["text"];
  const int n_prompt = one["usage"]["prompt_tokens"];
  // Another prompt, so the slot's cache does not serve the next requests.
  completion(ls, {{"prompt", "Tom and his mom went to the park"}, {"max_tokens", 1}});
  const double cached0 = metric(ls, "sluice_prompt_tokens_cached_total");
  const double prompt0 = metric(ls, "sluice_prompt_tokens_total");
  const json two = completion(ls, {{"prompt", prompt + " a"}, {"max_tokens", 10}, {"n", 2}});
  ASSERT_EQ(two["choices"].size(), 2u) << two;
  for (int i = 0; i < 2; ++i) EXPECT_EQ(two["choices"][i]["index"], i);
  EXPECT_EQ(two["choices"][0]["text"], two["choices"][1]["text"]);
  EXPECT_EQ(two["usage"]["completion_tokens"], 20);
  // The second choice evaluated none of the prompt.
  const int n2 = two["usage"]["prompt_tokens"];
  EXPECT_EQ(metric(ls, "sluice_prompt_tokens_total") - prompt0, 2 * n2);
  EXPECT_EQ(metric(ls, "sluice_prompt_tokens_cached_total") - cached0,
            two["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() + n2);
  // Greedy n = 2 on the first prompt gives the n = 1 text twice.
  const json again = completion(ls, {{"prompt", prompt}, {"max_tokens", 10}, {"n", 2}});
  ASSERT_EQ(again["choices"].size(), 2u);
  EXPECT_EQ(again["choices"][0]["text"], solo);
  EXPECT_EQ(again["choices"][1]["text"], solo);
  EXPECT_EQ(again["usage"]["prompt_tokens"], n_prompt);
  // Sampled with a seed: three choices, the same three again for the same seed.
  const json sampled = {{"prompt", prompt}, {"max_tokens", 12}, {"n", 3}, {"temperature", 1.0}, {"seed", 7}};
  const json a = completion(ls, sampled), b = completion(ls, sampled);
  ASSERT_EQ(a["choices"].size(), 3u) << a;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a["choices"][i]["index"], i);
    EXPECT_EQ(a["choices"][i]["text"], b["choices"][i]["text"]) << i;
  }
  // Streamed: each chunk carries its choice's index; the texts are the whole answers'.
  json body = {{"prompt", prompt}, {"max_tokens", 10}, {"n", 2}, {"stream", true}};
  auto res = ls.client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  std::string texts[2];
  int usages = 0;
  size_t pos = 0;
  while ((pos = res->body.find("data: {", pos)) != std::string::npos) {
    const size_t end = res->body.find("\n\n", pos);
    const json j = json::parse(res->body.substr(pos + 6, end - pos - 6));
    for (const json& c : j["choices"]) texts[c["index"].get<int>()] += c["text"].get<std::string>();
    if (j.contains("usage") && !j["usage"].is_null()) {
      ++usages;
      EXPECT_EQ(j["usage"]["completion_tokens"], 20);
    }
    pos = end;
  }
  EXPECT_EQ(texts[0], solo);
  EXPECT_EQ(texts[1], solo);
  EXPECT_EQ(usages, 1);
  // More choices than slots: a 400 naming n.
  auto over = ls.client().Post("/v1/completions", json({{"prompt", prompt}, {"n", 4}}).dump(), "application/json");
  ASSERT_TRUE(over);
  EXPECT_EQ(over->status, 400);
  EXPECT_NE(over->body.find("'n' is 4"), std::string::npos) << over->body;
}

TEST(ServeBatch, APromptTakesTheSlotWithTheLongestSharedPrefix) {
  LiveServer ls(plain_config(), 3);
  const std::string a = "One day, a little bird flew over the river and saw";
  const std::string b = "Tom and his mom went to the park to play with";
  completion(ls, {{"prompt", a}, {"max_tokens", 2}});
  completion(ls, {{"prompt", b}, {"max_tokens", 2}});
  // b shares only BOS with a's slot: it takes an unused slot instead of
  // wiping a's cache, so each prompt again finds its own slot's tokens.
  for (const std::string& p : {a, b}) {
    const json j = completion(ls, {{"prompt", p + " a"}, {"max_tokens", 2}});
    const int n_prompt = j["usage"]["prompt_tokens"];
    EXPECT_GE(j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), n_prompt - 2) << p;
  }
}

}  // namespace
}  // namespace sluice::test
