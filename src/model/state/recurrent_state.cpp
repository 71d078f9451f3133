#include "model/state/recurrent_state.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace sluice::model {

RecurrentState::RecurrentState(const RecurrentSpec& spec) : spec_(spec) {
  if (spec.conv_taps < 0 || spec.conv_channels < 0 || spec.n_heads < 0 || spec.head_size < 0)
    throw Error("recurrent state: negative size (conv " + std::to_string(spec.conv_taps) + " x " +
                std::to_string(spec.conv_channels) + ", " + std::to_string(spec.n_heads) + " heads of " +
                std::to_string(spec.head_size) + ")");
  values_.assign(spec.floats(), 0.0f);
}

void RecurrentState::reset() { std::fill(values_.begin(), values_.end(), 0.0f); }

void RecurrentState::save(std::vector<float>& out) const { out.assign(values_.begin(), values_.end()); }

void RecurrentState::restore(const std::vector<float>& saved) {
  if (saved.size() != values_.size())
    throw Error("recurrent state: a checkpoint of " + std::to_string(saved.size()) + " floats cannot restore a state of " +
                std::to_string(values_.size()));
  std::copy(saved.begin(), saved.end(), values_.begin());
}

}  // namespace sluice::model
