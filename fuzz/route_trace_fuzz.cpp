// libFuzzer target for the route-trace reader (moe/route_trace.h): any bytes
// must parse or throw sluice::Error — never crash, hang or leak. Whatever
// parses must satisfy the reader's contract, and sluice-format records must
// survive a write/read round trip.
#include <cstddef>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>

#include "moe/route_trace.h"
#include "util/error.h"

using namespace sluice;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moe::RouteTrace trace;
  try {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    trace = moe::parse_route_trace(in, "fuzz.jsonl");
  } catch (const Error&) {
    return 0;
  }
  for (const moe::RouteRecord& r : trace.records) {
    // Contract: distinct expert ids, weights/hit empty or one per expert.
    if (std::set<int>(r.experts.begin(), r.experts.end()).size() != r.experts.size()) __builtin_trap();
    if (!r.weights.empty() && r.weights.size() != r.experts.size()) __builtin_trap();
    if (!r.hit.empty() && r.hit.size() != r.experts.size()) __builtin_trap();
    if (r.layer < 0 || r.layer >= trace.n_layers()) __builtin_trap();
    for (int e : r.experts)
      if (e < 0 || e >= trace.n_expert()) __builtin_trap();
  }
  (void)trace.max_top_k();
  (void)trace.n_tokens();
  if (trace.format == "sluice" && !trace.records.empty()) {
    const moe::RouteRecord& r = trace.records.front();
    std::istringstream again(moe::route_record_json(r) + "\n");
    try {
      const moe::RouteTrace back = moe::parse_route_trace(again, "again.jsonl");
      if (back.records.size() != 1) __builtin_trap();
      const moe::RouteRecord& b = back.records.front();
      if (b.seq != r.seq || b.pos != r.pos || b.layer != r.layer || b.experts != r.experts || b.hit != r.hit)
        __builtin_trap();
    } catch (const Error&) {
      __builtin_trap();  // what we write we must read
    }
  }
  return 0;
}
