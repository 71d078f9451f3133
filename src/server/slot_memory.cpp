#include "server/slot_memory.h"

#include "moe/cache_budget.h"

namespace sluice::server {

std::string SlotMemory::refusal(uint64_t in_use, const std::string& why) const {
  const uint64_t available = in_use < budget ? budget - in_use : 0;
  std::string m = "not enough memory for this request's model state: a slot needs " +
                  std::to_string(slot_bytes) + " bytes (" + moe::format_mib(slot_bytes) +
                  ": KV rows and recurrent state of -c " + std::to_string(n_ctx) +
                  " positions) but " + std::to_string(available) + " bytes (" +
                  moe::format_mib(available) + ") of the " + std::to_string(budget) +
                  "-byte slot state budget (" + moe::format_mib(budget) +
                  ", --state-mb) are available";
  if (!why.empty()) m += " (" + why + ")";
  return m + " and no running request would free more; raise --state-mb or lower -c";
}

}  // namespace sluice::server
