// The memory the serve slots' model states may hold (ModelConfig::lazy_slots,
// `sluice serve --state-mb`): a slot's state (KV rows of -c positions,
// recurrent state) is allocated when a request is scheduled onto it, kept
// afterwards for prefix reuse while the budget allows, and given up (the least
// recently used idle slot's first) when another request needs the memory.
//
// The budget is Model::slot_state_budget(): the same figure the load-time
// memory check and `--cache-mb auto` take off for the slots, so the expert
// cache and the slots never count the same bytes twice.
//
// A request that cannot get a slot's state waits in the queue while another
// request runs (it will free memory when it ends); when none runs and it still
// cannot get one, it fails with MemoryBudgetError (the server's 503).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace sluice::server {

// No memory for a request's slot state, and nothing running would free any: the server's 503.
class MemoryBudgetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SlotMemory {
  uint64_t slot_bytes = 0;  // one slot's state (every slot is alike)
  uint64_t budget = 0;      // what the slots' states may hold at once
  int n_ctx = 0;            // positions one slot's KV rows hold (-c)

  // Slots whose states fit the budget together.
  uint64_t slots_that_fit() const { return slot_bytes == 0 ? UINT64_MAX : budget / slot_bytes; }
  // Whether one more slot's state fits beside `in_use` bytes.
  bool fits(uint64_t in_use) const { return in_use <= budget && slot_bytes <= budget - in_use; }

  // The 503's message: the bytes a request needs vs those available, and the
  // flags that change them. `why` (optional) says what failed besides the budget.
  std::string refusal(uint64_t in_use, const std::string& why = "") const;
};

}  // namespace sluice::server
