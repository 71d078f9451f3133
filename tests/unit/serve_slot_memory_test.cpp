// `sluice serve --state-mb`: the slots' model state is allocated as requests
// need it, within a budget (server/slot_memory.h). A request that finds the
// budget full waits for a running one and then gives its solo text; one that
// can never fit is a 503 naming the bytes and the flag; /metrics reports the
// state bytes, the budget and the 503s, and no state is held before any
// request or by a slot running none.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "serve_test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

using json = nlohmann::json;

std::string completion_text(const LiveServer& ls, const json& body) {
  auto res = ls.client().Post("/v1/completions", body.dump(), "application/json");
  EXPECT_TRUE(res);
  if (!res) return "";
  EXPECT_EQ(res->status, 200) << res->body;
  const json j = json::parse(res->body, nullptr, false);
  return j.is_object() ? j["choices"][0]["text"].get<std::string>() : "";
}

uint64_t one_slot_bytes() {
  // The bundled model's slot state at its default context, as the server sizes it.
  static const uint64_t bytes = [] {
    LiveServer probe(plain_config(), 1);
    return probe.session->model().slot_state_bytes().total();
  }();
  return bytes;
}

TEST(ServeSlotMemory, NoStateIsHeldBeforeAnyRequestAndNoneIsBusyAfter) {
  LiveServer ls(plain_config(), 2);
  const double slot = static_cast<double>(ls.session->model().slot_state_bytes().total());
  ASSERT_GT(slot, 0);
  EXPECT_EQ(metric(ls, "sluice_slot_state_bytes"), 0);  // the baseline: lazy slots hold nothing yet
  EXPECT_EQ(metric(ls, "sluice_slot_state_budget_bytes"),
            2 * slot);  // --state-mb 0: --parallel slots' worth
  std::thread other([&] {
    completion_text(ls, {{"prompt", "The little dog"}, {"max_tokens", 8}});
  });
  completion_text(ls, {{"prompt", "One day, a girl named Lily"}, {"max_tokens", 8}});
  other.join();
  EXPECT_EQ(metric(ls, "sluice_slot_state_busy_bytes"), 0);
  const double held = metric(ls, "sluice_slot_state_bytes");  // idle slots cached for prefix reuse
  EXPECT_GE(held, slot);
  EXPECT_LE(held, 2 * slot);
  EXPECT_EQ(metric(ls, "sluice_requests_rejected_memory_total"), 0);
}

TEST(ServeSlotMemory, ARequestThatFindsTheBudgetFullWaitsThenGivesItsSoloText) {
  const uint64_t slot = one_slot_bytes();
  LiveServer ls(plain_config(), 2, slot + slot / 2);  // one slot's state fits, two do not
  const json body = {{"prompt", "Tom and his mom went to the park"}, {"max_tokens", 12}};
  const std::string solo = completion_text(ls, body);
  ASSERT_FALSE(solo.empty());

  const int fd = open_long_stream(ls);  // holds the one state the budget allows
  ASSERT_GE(fd, 0);
  std::string waited;
  std::thread second([&] { waited = completion_text(ls, body); });
  // A slot is free, but its state is not: the request waits in the queue.
  ASSERT_TRUE(wait_for_metric(ls, "sluice_queue_depth", 1));
  EXPECT_EQ(metric(ls, "sluice_slots_busy"), 1);
  EXPECT_EQ(metric(ls, "sluice_slot_state_bytes"), static_cast<double>(slot));
  EXPECT_EQ(metric(ls, "sluice_slot_state_busy_bytes"), static_cast<double>(slot));
  ::close(fd);  // the long request is cancelled: its state serves the waiting one
  second.join();
  EXPECT_EQ(waited, solo);
  EXPECT_EQ(metric(ls, "sluice_queue_depth"), 0);
  EXPECT_EQ(metric(ls, "sluice_slot_state_busy_bytes"), 0);
  EXPECT_EQ(metric(ls, "sluice_slot_state_bytes"),
            static_cast<double>(slot));  // never more than the budget
  EXPECT_EQ(metric(ls, "sluice_requests_rejected_memory_total"), 0);
}

TEST(ServeSlotMemory, ABudgetBelowOneSlotIs503NamingTheBytesAndTheFlag) {
  const uint64_t slot = one_slot_bytes();
  const uint64_t budget = slot / 2;
  LiveServer ls(plain_config(), 2, budget);
  for (bool streamed : {false, true}) {
    auto res = ls.client().Post(
        "/v1/completions",
        json({{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"stream", streamed}}).dump(),
        "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 503) << res->body;
    const json j = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << res->body;
    EXPECT_EQ(j["error"]["code"], 503);
    EXPECT_EQ(j["error"]["type"], "server_error");
    const std::string m = j["error"]["message"];
    EXPECT_NE(m.find("a slot needs " + std::to_string(slot) + " bytes"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(budget) + " bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("--state-mb"), std::string::npos) << m;
  }
  // llama-server's /completion answers alike.
  auto llama = ls.client().Post("/completion", json({{"prompt", "Hi"}, {"n_predict", 4}}).dump(),
                                "application/json");
  ASSERT_TRUE(llama);
  EXPECT_EQ(llama->status, 503) << llama->body;
  EXPECT_EQ(metric(ls, "sluice_requests_rejected_memory_total"), 3);
  EXPECT_EQ(metric(ls, "sluice_requests_rejected_total"), 0);  // not the queue's 429
  EXPECT_EQ(metric(ls, "sluice_slot_state_bytes"), 0);
  EXPECT_EQ(metric(ls, "sluice_slot_state_budget_bytes"), static_cast<double>(budget));
}

}  // namespace
}  // namespace sluice::test
