#include "model/model.h"

#include <algorithm>
#include <string>
#include <vector>

#include "model/arch.h"
#include "model/transformer.h"
#include "util/error.h"

namespace sluice::model {

std::unique_ptr<Model> load_model(std::shared_ptr<const gguf::GgufModel> gguf, const ModelConfig& cfg) {
  if (!gguf) throw Error("load_model: no model");
  ArchDesc desc = describe_architecture(*gguf);
  return std::make_unique<Transformer>(std::move(gguf), cfg, std::move(desc));
}

int prefetch_depth_for_batch(int setting, int top_k, int n_tokens) {
  if (setting == 0 || top_k <= 0) return 0;
  if (setting == kPrefetchPrefill) return n_tokens > 1 ? top_k : 0;
  if (setting == kPrefetchAuto) return std::max(1, top_k / 2);
  if (setting < 0) throw Error("prefetch depth must be >= 0 or auto (got " + std::to_string(setting) + ")");
  return std::min(setting, top_k);
}

int resolve_prefetch_depth(int setting, int top_k) { return prefetch_depth_for_batch(setting, top_k, 1); }

namespace {
void check_slot_zero(int slot) {
  if (slot != 0) throw Error("slot " + std::to_string(slot) + " is out of range [0, 1)");
}
}  // namespace

// A model with one slot: slot 0 is the single-sequence API.
int Model::slot_n_past(int slot) const {
  check_slot_zero(slot);
  return n_past();
}

int Model::slot_truncate(int slot, int n) {
  check_slot_zero(slot);
  return truncate(n);
}

void Model::slot_checkpoint(int slot) {
  check_slot_zero(slot);
  checkpoint();
}

void Model::slot_reset(int slot) {
  check_slot_zero(slot);
  reset();
}

void Model::eval_batch(std::span<const SequenceEval> seqs) {
  for (const SequenceEval& s : seqs) check_slot_zero(s.slot);
  if (seqs.size() > 1) throw Error("eval_batch: slot 0 appears twice in one batch");
  for (const SequenceEval& s : seqs) {
    if (s.tokens.empty()) continue;
    std::vector<float> last;
    float* out = s.logits_out;
    if (!out) {
      last.resize(hparams().n_vocab);
      out = last.data();
    }
    if (s.all_rows && s.logits_out) eval(s.tokens, n_past(), out);
    else eval_last(s.tokens, n_past(), out);
  }
}

}  // namespace sluice::model
