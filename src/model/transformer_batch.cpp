// Transformer's sequence slots and eval_batch(): several sequences in one
// forward pass. Each sequence's mixer runs on its own slot state over its own
// rows (forward_layer's segments); norms, projections, routers and the MoE FFN
// run over the stacked rows, so a MoE layer fetches each expert once for the
// union of the batch's routes. Every kernel is row-independent, so a
// sequence's logits do not depend on what it is batched with.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/norm.h"
#include "model/transformer.h"
#include "util/clock.h"
#include "util/error.h"

namespace sluice::model {

ModelState& Transformer::slot_state(int slot) {
  return const_cast<ModelState&>(static_cast<const Transformer*>(this)->slot_state(slot));
}

const ModelState& Transformer::slot_state(int slot) const {
  if (slot < 0 || slot >= n_slots())
    throw Error("slot " + std::to_string(slot) + " is out of range [0, " +
                std::to_string(n_slots()) + ")");
  return slot == 0 ? *state_ : *extra_slots_[static_cast<size_t>(slot - 1)];
}

void Transformer::slot_reset(int slot) {
  slot_state(slot).reset();
  if (slot == 0 && mtp_.state) mtp_.state->reset();
}

void Transformer::slot_release(int slot) {
  slot_state(slot).release();
  if (slot == 0 && mtp_.state) mtp_.state->reset();
}

void Transformer::embed_row(int32_t token, int row) {
  const int64_t n_embd = hp_.n_embd, width = x_width();
  float* x = &x_[static_cast<size_t>(row * width)];
  kernels::dequantize_row(token_embd_->type, token_embd_data_ + token_embd_->row_bytes() * token, x, n_embd);
  if (hp_.embd_scale != 0.0f)  // Gemma 4: the input scaled by sqrt(n_embd)
    for (int64_t i = 0; i < n_embd; ++i) x[i] *= hp_.embd_scale;
  for (int64_t s = n_embd; s < width; s += n_embd) std::copy_n(x, n_embd, x + s);  // every hyper-connection stream
  if (static_cast<size_t>(row) < row_tokens_.size()) row_tokens_[static_cast<size_t>(row)] = token;
}

void Transformer::run_trunk(int T, std::span<const RowSegment> segs) {
  xn_.resize(x_.size());
  tmp_.resize(x_.size());
  trace_buf_.clear();
  for (int il = 0; il < static_cast<int>(hp_.n_layer); ++il) forward_layer(il, T, segs, il);
  prefetch_.reset();  // none after the last layer; never carried into the next ubatch
  if (cfg_.route_trace) {
    // Collected layer by layer; the file is token-major.
    std::stable_sort(
        trace_buf_.begin(), trace_buf_.end(),
        [](const moe::RouteRecord& a, const moe::RouteRecord& b) { return a.pos < b.pos; });
    for (const moe::RouteRecord& r : trace_buf_) cfg_.route_trace->write(r);
    trace_buf_.clear();
  }
}

void Transformer::count_batch_experts(int il, std::span<const RowSegment> segs) {
  const size_t n_expert = hp_.n_expert;
  // One marker per (sequence) pass and one for the union: an expert is new to
  // a set when its marker is not the set's.
  if (batch_seen_.size() != 2 * n_expert) batch_seen_.assign(2 * n_expert, 0);
  uint64_t union_n = 0, seq_n = 0;
  const uint32_t union_mark = ++batch_mark_;
  for (const RowSegment& sg : segs) {
    const uint32_t mark = ++batch_mark_;
    for (int t = sg.row0; t < sg.row0 + sg.n; ++t)
      for (const moe::ExpertWeight& ew : routes_.row(t)) {
        const size_t e = static_cast<size_t>(ew.expert);
        if (batch_seen_[e] != mark) batch_seen_[e] = mark, ++seq_n;
        if (batch_seen_[n_expert + e] != union_mark)
          batch_seen_[n_expert + e] = union_mark, ++union_n;
      }
  }
  const uint64_t bytes = store_ ? store_->expert_bytes(il) : 0;
  batch_.union_experts += union_n;
  batch_.sequence_experts += seq_n;
  batch_.union_bytes += union_n * bytes;
  batch_.sequence_bytes += seq_n * bytes;
  batch_.last_union_experts += union_n;
  batch_.last_sequence_experts += seq_n;
}

void Transformer::eval_batch(std::span<const SequenceEval> seqs) {
  // Validate everything before any state changes.
  std::vector<uint8_t> used(static_cast<size_t>(n_slots()), 0);
  for (const SequenceEval& s : seqs) {
    ModelState& st = slot_state(s.slot);
    if (used[static_cast<size_t>(s.slot)]++)
      throw Error("eval_batch: slot " + std::to_string(s.slot) + " appears twice in one batch");
    check_eval(s.tokens, st.n_past(), st, "eval_batch");
  }
  const auto t_eval = std::chrono::steady_clock::now();
  const int64_t n_vocab = hp_.n_vocab;
  const int S = cfg_.ubatch;
  std::vector<size_t> done(seqs.size(), 0);  // tokens of each sequence evaluated so far
  std::vector<int> start(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) start[i] = slot_state(seqs[i].slot).n_past();
  std::vector<RowSegment> segs;
  std::vector<size_t> seg_seq;  // the sequence of each segment
  batching_ = true;
  try {
    for (;;) {
      // One pass: up to S rows, taken from the sequences in order.
      segs.clear();
      seg_seq.clear();
      int T = 0;
      for (size_t i = 0; i < seqs.size() && T < S; ++i) {
        const size_t left = seqs[i].tokens.size() - done[i];
        if (left == 0) continue;
        const int n = static_cast<int>(std::min<size_t>(left, static_cast<size_t>(S - T)));
        ModelState* st = &slot_state(seqs[i].slot);
        segs.push_back({T, n, st->n_past(), st});
        seg_seq.push_back(i);
        T += n;
      }
      if (T == 0) break;
      x_.resize(static_cast<size_t>(T) * x_width());
      row_tokens_.resize(static_cast<size_t>(T));
      for (size_t k = 0; k < segs.size(); ++k)
        for (int r = 0; r < segs[k].n; ++r)
          embed_row(seqs[seg_seq[k]].tokens[done[seg_seq[k]] + static_cast<size_t>(r)],
                    segs[k].row0 + r);
      batch_.last_union_experts = batch_.last_sequence_experts = 0;
      for (const RowSegment& sg : segs) sg.st->begin_append(sg.n);
      run_trunk(T, segs);
      for (const RowSegment& sg : segs) sg.st->commit_append();
      // Logits: each sequence's wanted rows (all, or its very last one).
      // The single last rows of decoding sequences go through the output
      // matrix together (it is read once per step, not once per sequence:
      // in RAM it is a large share of a decode step's bytes); a sequence
      // that wants all its rows gets them straight into its buffer.
      const int64_t n_embd = hp_.n_embd;
      struct LastRow { float* out; int row; };
      std::vector<LastRow> last_rows;
      for (size_t k = 0; k < segs.size(); ++k) {
        const SequenceEval& s = seqs[seg_seq[k]];
        const RowSegment& sg = segs[k];
        const bool last = done[seg_seq[k]] + static_cast<size_t>(sg.n) == s.tokens.size();
        int first = s.all_rows ? 0 : (last ? sg.n - 1 : sg.n);
        if (!s.logits_out || first >= sg.n) continue;
        float* out = s.all_rows ? s.logits_out + static_cast<int64_t>(done[seg_seq[k]]) * n_vocab
                                : s.logits_out;
        const int n_out = sg.n - first;
        if (n_out == 1 && !s.all_rows) {
          last_rows.push_back({out, sg.row0 + first});
          continue;
        }
        final_norm_rows(&x_[static_cast<size_t>((sg.row0 + first) * x_width())], n_out, xn_.data());
        matmul_f32(output_, xn_.data(), n_out, out, pool_, act_);
        softcap_logits(out, n_out);
      }
      if (last_rows.size() == 1) {
        const LastRow& lr = last_rows.front();
        final_norm_rows(&x_[static_cast<size_t>(lr.row * x_width())], 1, xn_.data());
        matmul_f32(output_, xn_.data(), 1, lr.out, pool_, act_);
        softcap_logits(lr.out, 1);
      } else if (last_rows.size() > 1) {
        const int n = static_cast<int>(last_rows.size());
        for (int i = 0; i < n; ++i)  // xn_ holds T >= n rows
          final_norm_rows(&x_[static_cast<size_t>(last_rows[static_cast<size_t>(i)].row * x_width())], 1,
                          &xn_[static_cast<size_t>(i * n_embd)]);
        batch_logits_.resize(static_cast<size_t>(n * n_vocab));
        matmul_f32(output_, xn_.data(), n, batch_logits_.data(), pool_, act_);
        softcap_logits(batch_logits_.data(), n);
        for (int i = 0; i < n; ++i)
          std::copy_n(&batch_logits_[static_cast<size_t>(i * n_vocab)], n_vocab, last_rows[static_cast<size_t>(i)].out);
      }
      for (size_t k = 0; k < segs.size(); ++k) done[seg_seq[k]] += static_cast<size_t>(segs[k].n);
      tokens_evaluated_ += static_cast<uint64_t>(T);
      ++batch_.steps;
      batch_.rows += static_cast<uint64_t>(T);
      batch_.sequences += segs.size();
      batch_.last_sequences = static_cast<int>(segs.size());
      batch_.last_rows = T;
    }
  } catch (...) {
    batching_ = false;
    prefetch_.reset();
    // As eval(): every sequence keeps [0, its start), or less where a
    // recurrent layer fell back to a checkpoint.
    for (size_t i = 0; i < seqs.size(); ++i) {
      ModelState& st = slot_state(seqs[i].slot);
      st.abort_append();
      if (st.n_past() > start[i]) st.truncate(start[i]);
    }
    eval_s_ += seconds_since(t_eval);
    throw;
  }
  batching_ = false;
  eval_s_ += seconds_since(t_eval);
}

}  // namespace sluice::model
