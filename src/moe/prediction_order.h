// The order in which a prefetch reads its predicted experts.
//
// A prefetch predicts `depth` experts per position (slot 0 the most
// probable). Its reads queue behind demand reads and only some lanes run
// them (moe/read_lanes.h), so the ones read first are the ones most likely to
// be needed: the expert some position ranks highest comes first; among equal
// best ranks, the one more positions predict; then the lower id, so the
// order never depends on anything but the prediction.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sluice::moe {

struct PredictedExpert {
  int32_t expert = 0;
  int uses = 0;  // positions that predict it
};

// rows: n_positions x depth expert ids, each row in slot order. Error when
// depth < 1 or rows.size() is not a multiple of it.
std::vector<PredictedExpert> order_predictions(std::span<const int32_t> rows, int depth);

}  // namespace sluice::moe
