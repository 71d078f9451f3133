// A ModelState as bytes: what one sequence holds (its position count, every
// KV layer's rows [0, n_past), every recurrent layer's values), so a slot can
// be saved to a file and restored later, or copied to another slot.
//
// The bytes describe the state only; they do not say which model made them
// (runtime/slot_file.h wraps them in a header that does). Layout, host byte
// order (little-endian on every supported machine):
//   u32 n_layers, i32 n_past, u32 kv_type (0 f32, 1 f16)
//   per layer: u8 kind (0 none, 1 KV rows, 2 recurrent, 3 a sliding-window ring), then
//     KV rows:   u32 k_dim, u32 v_dim, n_past*k_dim keys, n_past*v_dim values
//                (the stored element type: f32 or f16 bits)
//     ring:      u32 k_dim, u32 v_dim, i32 first (its oldest held position), then
//                (n_past - first) keys and values as above, in position order
//                (read back into a ring of any capacity that holds the window;
//                refused by a layer that keeps every row, unless first is 0)
//     then, for a layer with completed-block rows (deepseek4): u8 4, u32 width,
//                i32 n_past / ratio, that many rows of width values
//     recurrent: u64 n_floats, n_floats f32 values
// Checkpoints are not written: read_state() leaves one at n_past (recurrent
// layers), so rolling back below the restored position re-evaluates from 0.
#pragma once

#include <string>
#include <string_view>

#include "model/state/model_state.h"

namespace sluice::model {

// Appends `st`'s bytes to `out`. Error during an open append.
void write_state(const ModelState& st, std::string& out);

// Replaces `st` with the state `in` describes. Every count is checked
// against `st`'s own layers before anything is written (no allocation is
// sized by the bytes): Error "slot state: ..." naming the field when the
// bytes are cut short, have extra bytes, or describe another layer layout,
// KV type or a position count past the context; `st` is then reset (empty).
void read_state(ModelState& st, std::string_view in);

}  // namespace sluice::model
