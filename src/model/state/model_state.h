// A model's state between evaluations: one entry per layer (KV rows, a
// recurrent state, or nothing; see state_spec.h), the number of positions it
// holds, and the rollback contract.
//
// Appending: the forward pass calls begin_append(T) (reserves positions
// [n_past, n_past + T); Error "context full" past the context), lets each
// layer write its rows / update its recurrent state, then commit_append().
// After a failure part-way, abort_append() drops the partial append.
//
// Rollback: truncate(n) returns the position the state really holds
// afterwards, r <= n (a layer's completed-block rows are cut to r / ratio):
//   - KV rows roll back exactly (r == n) when no layer is recurrent;
//   - a recurrent layer cannot: the state restores the newest checkpoint at
//     or before n (or the zero state at 0) and every layer is cut to that
//     position r. The caller re-evaluates tokens [r, n) from its own history.
//   - a sliding-window ring (KvRows::ring) rolls back exactly while it
//     still holds the window before n (rollbacks up to its slack,
//     state_spec.h's ring_slack); further back it cannot: the state falls
//     back to the newest checkpoint the rings still hold, else to 0.
// Never silently wrong: n_past() is always what the state truly holds.
//
// Memory: a state may be released (its layers' buffers freed: the state is
// then empty and begin_append is an Error) and allocated again, so a server
// slot holds memory only while a request uses it or its cached prefix is
// worth keeping. bytes() is what an allocated state holds either way.
//
// Checkpoints: checkpoint() copies every recurrent layer's values at n_past()
// (nothing to copy when no layer is recurrent: then it is a no-op). At most
// max_checkpoints are kept, the oldest dropped first; a truncate drops those
// past the position it rolls back to.
//
// Row checkpoints (MTP verification): capture_rows(n) before an append makes
// the state at the end of each of that append's first n rows a checkpoint
// once it commits (positions n_past()+1 .. n_past()+n), so a truncate to any
// of them restores it exactly instead of re-evaluating tokens. The layers
// write those values during the append, through row_capture().
#pragma once

#include <memory>
#include <vector>

#include "model/state/kv_rows.h"
#include "model/state/recurrent_state.h"
#include "model/state/state_spec.h"

namespace sluice::model {

class ModelState {
 public:
  static constexpr int kDefaultMaxCheckpoints = 4;

  // Allocates every layer's state unless !allocate_now (std::bad_alloc when
  // memory runs out: the caller sizes with state_bytes() first). Error for
  // n_ctx <= 0 or a KV layer whose capacity is not n_ctx (a ring: not
  // between window and n_ctx).
  ModelState(std::vector<LayerStateSpec> specs, KvType kv_type, int n_ctx,
             int max_checkpoints = kDefaultMaxCheckpoints, bool allocate_now = true);

  // See "Memory" above. allocate() on an allocated state and release() on a
  // released one do nothing; both leave the state empty (n_past() 0).
  // allocate() throws std::bad_alloc and stays released when memory runs out.
  void allocate();
  void release();
  bool allocated() const { return allocated_; }

  int n_layers() const { return static_cast<int>(specs_.size()); }
  const LayerStateSpec& spec(int layer) const { return specs_.at(static_cast<size_t>(layer)); }
  int n_ctx() const { return n_ctx_; }
  int n_past() const { return n_past_; }
  bool has_recurrent() const { return n_recurrent_ > 0; }

  // The layer's state; Error when the layer keeps another kind.
  KvRows& kv(int layer);
  const KvRows& kv(int layer) const;
  // The layer's completed-block rows (LayerStateSpec::blocks), indexed by
  // block; nullptr when the layer keeps none.
  KvRows* blocks(int layer);
  const KvRows* blocks(int layer) const;
  RecurrentState& recurrent(int layer);

  void begin_append(int n_tokens);
  void commit_append();
  // Drops the uncommitted append; a recurrent layer it touched falls back to
  // the newest checkpoint at or before n_past(). Returns n_past() afterwards.
  int abort_append();
  // See the contract above. Error for n outside [0, n_past()] (names both).
  int truncate(int n);
  void checkpoint();
  // Arms row checkpoints for the next append only (n <= 0: none); see above.
  void capture_rows(int n);
  // Where recurrent layer `layer` writes its values (RecurrentState::save's
  // layout: conv taps, then matrices) as they stand at the end of row `row`
  // of the open append; nullptr when that row is not captured.
  float* row_capture(int layer, int row);
  std::vector<int> checkpoint_positions() const;
  // Forgets every position and checkpoint (recurrent layers back to zero).
  void reset();

  // Bytes the layers' states hold when allocated: equals state_bytes(specs, kv_type).
  StateBytes bytes() const;
  // Bytes held by checkpoints (copies of the recurrent layers).
  uint64_t checkpoint_bytes() const;

 private:
  struct Layer {
    std::unique_ptr<KvRows> kv;
    std::unique_ptr<KvRows> blocks;  // row b: block b (n_past / ratio of them held)
    std::unique_ptr<RecurrentState> rec;
  };
  struct Checkpoint {
    int pos = 0;
    std::vector<std::vector<float>> values;  // per layer; empty for non-recurrent layers
  };
  // Restores the newest checkpoint at or before n (zero state when none),
  // cuts the KV rows to its position, drops later checkpoints; returns it.
  int fall_back(int n);
  // Whether every ring still holds the keys a token at position n reads.
  bool rings_hold(int n) const;
  // Appends c (its position past every kept one), dropping the oldest when full.
  void keep(Checkpoint c);
  // Declares positions [0, n) valid (or being written) in every layer's rows
  // and blocks (KvRows::set_filled; blocks: the n / ratio completed ones).
  void set_filled(int n);

  std::vector<LayerStateSpec> specs_;
  KvType kv_type_;
  int n_ctx_;
  int max_checkpoints_;
  int n_recurrent_ = 0;
  int n_ring_ = 0;
  bool allocated_ = false;
  int n_past_ = 0;
  int appending_ = 0;  // tokens of the open append (0: none)
  std::vector<Layer> layers_;
  std::vector<Checkpoint> checkpoints_;  // ascending positions
  int capture_next_ = 0;                 // rows the next append captures
  std::vector<Checkpoint> pending_;      // the open append's row checkpoints
};

}  // namespace sluice::model
