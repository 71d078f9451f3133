// ModelConfig::lazy_slots (`sluice serve`): every slot starts without memory,
// slot_allocate gives it an empty state and slot_release takes it back; a
// lazily allocated slot gives the same logits, bit for bit, as an eager one,
// and the slots' budget (--state-mb) is what the load-time memory check uses.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/model.h"
#include "model_test_support.h"
#include "moe/cache_budget.h"
#include "util/error.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

std::string stories() {
  return source_path("models/stories-moe-8x-q8_0.gguf");
}

model::ModelConfig config(int slots, bool lazy) {
  auto c = golden_config();
  c.n_ctx = 64;
  c.n_slots = slots;
  c.lazy_slots = lazy;
  return c;
}

std::vector<float> prompt_logits(model::Model& m, int slot, const std::vector<int32_t>& prompt) {
  std::vector<float> out(m.hparams().n_vocab);
  model::SequenceEval e;
  e.slot = slot;
  e.tokens = prompt;
  e.logits_out = out.data();
  const model::SequenceEval one[1] = {e};
  m.eval_batch(one);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(LazySlots, ASlotHoldsMemoryOnlyWhileAllocatedAndGivesTheEagerLogits) {
  const std::vector<int32_t> prompt = {1, 20, 30, 40, 50};
  auto eager = load(stories(), config(2, false));
  const std::vector<float> want = prompt_logits(*eager, 1, prompt);

  auto lazy = load(stories(), config(2, true));
  const uint64_t slot = lazy->slot_state_bytes().total();
  EXPECT_EQ(slot, eager->slot_state_bytes().total());
  EXPECT_EQ(lazy->slot_state_budget(), 2 * slot);  // no --state-mb: --parallel slots' worth
  EXPECT_FALSE(lazy->slot_allocated(0));
  EXPECT_FALSE(lazy->slot_allocated(1));
  EXPECT_THROW(prompt_logits(*lazy, 1, prompt), Error);  // no memory, no evaluation
  EXPECT_EQ(lazy->slot_n_past(1), 0);

  lazy->slot_allocate(1);
  EXPECT_TRUE(lazy->slot_allocated(1));
  EXPECT_FALSE(lazy->slot_allocated(0));
  EXPECT_TRUE(same_bits(prompt_logits(*lazy, 1, prompt), want));
  EXPECT_EQ(lazy->slot_n_past(1), static_cast<int>(prompt.size()));

  lazy->slot_release(1);
  EXPECT_FALSE(lazy->slot_allocated(1));
  EXPECT_EQ(lazy->slot_n_past(1), 0);
  lazy->slot_allocate(1);  // a fresh, empty state: the same logits again
  EXPECT_TRUE(same_bits(prompt_logits(*lazy, 1, prompt), want));
}

TEST(LazySlots, TheStateBudgetIsCheckedAgainstMemoryAndNamesTheFlag) {
  auto cfg = config(4, true);
  cfg.slot_state_budget = uint64_t{8} << 30;
  cfg.memory_bytes = uint64_t{1} << 30;
  try {
    load(stories(), cfg);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("more than the 1024 MiB of memory available; lower --state-mb"),
              std::string::npos)
        << m;
  }
  // A budget below one slot loads (the server answers each request 503).
  cfg.slot_state_budget = 1;
  EXPECT_EQ(load(stories(), cfg)->slot_state_budget(), 1u);
}

TEST(LazySlots, CacheMbAutoLeavesTheStateBudgetFree) {
  // --cache-mb auto takes off the slots' budget, not what they hold now (nothing, at load).
  std::vector<std::string> lines;
  auto cfg = config(4, true);
  cfg.cache_auto = true;
  cfg.cache_meminfo = "MemTotal: 99999999 kB\nMemAvailable: 67108864 kB\n";  // 64 GiB
  cfg.log = [&lines](const std::string& l) { lines.push_back(l); };
  const uint64_t slot = load(stories(), cfg)->slot_state_bytes().total();
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("- KV " + moe::format_mib(4 * slot) + " -"), std::string::npos)
      << lines[0];
  lines.clear();
  cfg.slot_state_budget = uint64_t{100} << 20;  // --state-mb 100
  load(stories(), cfg);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("- KV 100 MiB -"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace sluice::test
