#include "model/state/model_state.h"

#include <algorithm>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim
#endif

#include "util/error.h"

namespace sluice::model {

ModelState::ModelState(std::vector<LayerStateSpec> specs, KvType kv_type, int n_ctx, int max_checkpoints,
                       bool allocate_now)
    : specs_(std::move(specs)), kv_type_(kv_type), n_ctx_(n_ctx), max_checkpoints_(std::max(max_checkpoints, 1)) {
  if (n_ctx <= 0) throw Error("context size must be > 0 (got " + std::to_string(n_ctx) + ")");
  for (size_t i = 0; i < specs_.size(); ++i) {
    const LayerStateSpec& s = specs_[i];
    if (s.kind == StateKind::KvRows) {
      // A ring must hold its window and at least one more row (the new one).
      if (s.kv.ring ? !(s.kv.window > 0 && s.kv.capacity > s.kv.window && s.kv.capacity < n_ctx)
                    : s.kv.capacity != n_ctx)
        throw Error("model state: layer " + std::to_string(i) + " holds " + std::to_string(s.kv.capacity) +
                    " KV rows" + (s.kv.ring ? " as a ring for a window of " + std::to_string(s.kv.window) : "") +
                    ", the context is " + std::to_string(n_ctx));
      if (s.kv.ring) ++n_ring_;
    } else if (s.kind == StateKind::Recurrent) {
      ++n_recurrent_;
    }
  }
  layers_.resize(specs_.size());
  if (allocate_now) allocate();
}

void ModelState::allocate() {
  if (allocated_) return;
  std::vector<Layer> layers(specs_.size());  // all or nothing: a bad_alloc leaves the state released
  for (size_t i = 0; i < specs_.size(); ++i) {
    const LayerStateSpec& s = specs_[i];
    if (s.kind == StateKind::KvRows) {
      layers[i].kv = std::make_unique<KvRows>(kv_type_, s.kv.capacity, s.kv.k_dim(), s.kv.v_dim(), s.kv.ring);
      // A context shorter than one block completes none: one row keeps KvRows valid.
      if (s.blocks.ratio > 0)
        layers[i].blocks = std::make_unique<KvRows>(kv_type_, std::max(s.blocks.capacity, 1), s.blocks.width, 0);
    }
    else if (s.kind == StateKind::Recurrent)
      layers[i].rec = std::make_unique<RecurrentState>(s.rec);
  }
  layers_ = std::move(layers);
  allocated_ = true;
  reset();
}

void ModelState::release() {
  reset();
  layers_.clear();
  layers_.resize(specs_.size());
  checkpoints_.shrink_to_fit();
  allocated_ = false;
#if defined(__GLIBC__)
  // glibc keeps freed blocks below its (adaptive) mmap threshold in the heap:
  // hand their pages back so a released slot really lowers RSS.
  malloc_trim(0);
#endif
}

KvRows& ModelState::kv(int layer) {
  return const_cast<KvRows&>(static_cast<const ModelState&>(*this).kv(layer));
}

const KvRows& ModelState::kv(int layer) const {
  if (layer < 0 || layer >= n_layers() || !layers_[static_cast<size_t>(layer)].kv)
    throw Error("model state: layer " + std::to_string(layer) + " keeps no KV rows");
  return *layers_[static_cast<size_t>(layer)].kv;
}

KvRows* ModelState::blocks(int layer) {
  return const_cast<KvRows*>(static_cast<const ModelState&>(*this).blocks(layer));
}

const KvRows* ModelState::blocks(int layer) const {
  if (layer < 0 || layer >= n_layers()) throw Error("model state: no layer " + std::to_string(layer));
  return layers_[static_cast<size_t>(layer)].blocks.get();
}

void ModelState::set_filled(int n) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = layers_[i];
    if (l.kv) l.kv->set_filled(n);
    if (l.blocks) l.blocks->set_filled(n / specs_[i].blocks.ratio);
  }
}

RecurrentState& ModelState::recurrent(int layer) {
  if (layer < 0 || layer >= n_layers() || !layers_[static_cast<size_t>(layer)].rec)
    throw Error("model state: layer " + std::to_string(layer) + " keeps no recurrent state");
  return *layers_[static_cast<size_t>(layer)].rec;
}

void ModelState::begin_append(int n_tokens) {
  if (appending_ > 0) throw Error("model state: an append is already open");
  if (n_tokens <= 0) throw Error("model state: append of " + std::to_string(n_tokens) + " tokens");
  if (!allocated_) throw Error("model state: its memory is released (allocate() first)");
  if (static_cast<int64_t>(n_past_) + n_tokens > n_ctx_)
    throw Error("context full: " + std::to_string(static_cast<int64_t>(n_past_) + n_tokens) +
                " positions needed, context size is " + std::to_string(n_ctx_) + " (raise -c)");
  set_filled(n_past_ + n_tokens);
  appending_ = n_tokens;
  pending_.clear();
  const int rows = n_recurrent_ > 0 ? std::min(capture_next_, n_tokens) : 0;
  capture_next_ = 0;
  pending_.resize(static_cast<size_t>(std::max(rows, 0)));
  for (int r = 0; r < rows; ++r) {
    Checkpoint& c = pending_[static_cast<size_t>(r)];
    c.pos = n_past_ + 1 + r;
    c.values.resize(layers_.size());
    for (size_t i = 0; i < layers_.size(); ++i)
      if (layers_[i].rec) c.values[i].resize(layers_[i].rec->spec().floats());
  }
}

void ModelState::commit_append() {
  n_past_ += appending_;
  appending_ = 0;
  for (Checkpoint& c : pending_) keep(std::move(c));
  pending_.clear();
}

void ModelState::capture_rows(int n) { capture_next_ = std::max(n, 0); }

float* ModelState::row_capture(int layer, int row) {
  if (row < 0 || static_cast<size_t>(row) >= pending_.size()) return nullptr;
  std::vector<float>& v = pending_[static_cast<size_t>(row)].values.at(static_cast<size_t>(layer));
  return v.empty() ? nullptr : v.data();
}

int ModelState::abort_append() {
  if (appending_ == 0) return n_past_;
  appending_ = 0;
  pending_.clear();
  set_filled(n_past_);
  // A recurrent layer may hold a partly updated value: only a checkpoint is
  // trustworthy; a ring may have overwritten rows the window still needs.
  if (n_recurrent_ > 0 || !rings_hold(n_past_)) fall_back(n_past_);
  return n_past_;
}

int ModelState::truncate(int n) {
  if (appending_ > 0) throw Error("model state: truncate during an append");
  if (n < 0 || n > n_past_)
    throw Error("truncate to position " + std::to_string(n) + " but the model state holds " +
                std::to_string(n_past_) + " positions");
  if (n == n_past_) return n_past_;
  if (n_recurrent_ > 0 || !rings_hold(n)) return fall_back(n);
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = layers_[i];
    if (l.kv) l.kv->truncate(n);
    if (l.blocks) l.blocks->truncate(n / specs_[i].blocks.ratio);
  }
  n_past_ = n;
  while (!checkpoints_.empty() && checkpoints_.back().pos > n) checkpoints_.pop_back();
  return n_past_;
}

bool ModelState::rings_hold(int n) const {
  if (n_ring_ == 0) return true;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const KvRows* kv = layers_[i].kv.get();
    // The next token (position n) reads keys [n + 1 - window, n).
    if (kv && kv->ring() && std::max(0, n + 1 - specs_[i].kv.window) < kv->first_held()) return false;
  }
  return true;
}

int ModelState::fall_back(int n) {
  while (!checkpoints_.empty() && checkpoints_.back().pos > n) checkpoints_.pop_back();
  // Checkpoints hold no ring rows: one a ring has moved past is no use either.
  while (!checkpoints_.empty() && !rings_hold(checkpoints_.back().pos)) checkpoints_.pop_back();
  int r = 0;  // no checkpoint: back to the start (set_filled(0) empties a ring too)
  if (checkpoints_.empty()) {
    for (Layer& l : layers_)
      if (l.rec) l.rec->reset();
  } else {
    const Checkpoint& c = checkpoints_.back();
    for (size_t i = 0; i < layers_.size(); ++i)
      if (layers_[i].rec) layers_[i].rec->restore(c.values[i]);
    r = c.pos;
  }
  set_filled(r);  // r <= n_past_: cuts every layer back
  n_past_ = r;
  return r;
}

void ModelState::checkpoint() {
  if (n_recurrent_ == 0 || !allocated_) return;  // KV rows roll back exactly: nothing to copy
  if (appending_ > 0) throw Error("model state: checkpoint during an append");
  Checkpoint c;
  if (!checkpoints_.empty() && checkpoints_.back().pos == n_past_) {
    c = std::move(checkpoints_.back());  // refresh it (the same position holds the same state)
    checkpoints_.pop_back();
  } else if (static_cast<int>(checkpoints_.size()) >= max_checkpoints_) {
    c = std::move(checkpoints_.front());  // reuse the oldest one's buffers
    checkpoints_.erase(checkpoints_.begin());
  }
  c.pos = n_past_;
  c.values.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i].rec) layers_[i].rec->save(c.values[i]);
  checkpoints_.push_back(std::move(c));
}

void ModelState::keep(Checkpoint c) {
  if (!checkpoints_.empty() && checkpoints_.back().pos >= c.pos) checkpoints_.pop_back();
  if (static_cast<int>(checkpoints_.size()) >= max_checkpoints_) checkpoints_.erase(checkpoints_.begin());
  checkpoints_.push_back(std::move(c));
}

std::vector<int> ModelState::checkpoint_positions() const {
  std::vector<int> out;
  for (const Checkpoint& c : checkpoints_) out.push_back(c.pos);
  return out;
}

void ModelState::reset() {
  appending_ = 0;
  capture_next_ = 0;
  pending_.clear();
  n_past_ = 0;
  checkpoints_.clear();
  for (Layer& l : layers_) {
    if (l.kv) l.kv->reset();
    if (l.blocks) l.blocks->reset();
    if (l.rec) l.rec->reset();
  }
}

StateBytes ModelState::bytes() const {
  // The specs' rule, so a released state still says what allocating it takes
  // (its layers were allocated by that rule, so nothing here can overflow).
  return state_bytes(specs_, kv_type_).value_or(StateBytes{});
}

uint64_t ModelState::checkpoint_bytes() const {
  uint64_t b = 0;
  for (const Checkpoint& c : checkpoints_)
    for (const std::vector<float>& v : c.values) b += v.size() * sizeof(float);
  return b;
}

}  // namespace sluice::model
