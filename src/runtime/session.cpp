#include "runtime/session.h"

#include <algorithm>
#include <chrono>

#include "util/error.h"

namespace sluice::runtime {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Session Session::open(const std::string& path, const model::ModelConfig& cfg) {
  auto g = std::make_shared<const gguf::GgufModel>(gguf::GgufModel::open(path));
  auto m = model::load_model(g, cfg);
  return Session(std::move(g), std::move(m));
}

Session::Session(std::shared_ptr<const gguf::GgufModel> gguf, std::unique_ptr<model::Model> model)
    : gguf_(std::move(gguf)), model_(std::move(model)) {
  logits_.resize(static_cast<size_t>(model_->hparams().n_vocab));
}

void Session::reset() {
  model_->reset();
  tokens_.clear();
  pending_.clear();
}

std::span<const float> Session::feed(std::span<const int32_t> tokens) {
  // The last token sampled by generate() was never evaluated: it goes first.
  std::vector<int32_t> all(pending_.begin(), pending_.end());
  all.insert(all.end(), tokens.begin(), tokens.end());
  if (all.empty()) throw Error("feed: no tokens");
  model_->eval_last(all, static_cast<int>(tokens_.size()), logits_.data());
  pending_.clear();
  tokens_.insert(tokens_.end(), all.begin(), all.end());
  return logits_;
}

GenerationStats Session::generate(std::span<const int32_t> prompt, int n_predict, Sampler& sampler,
                                  const std::function<bool(int32_t)>& on_token, std::span<const int32_t> stop_ids) {
  GenerationStats st;
  const int n_new = static_cast<int>(pending_.size() + prompt.size());
  if (n_new == 0) throw Error("generate: empty prompt");
  auto t0 = std::chrono::steady_clock::now();
  feed(prompt);
  st.prefill_tokens = n_new;
  st.prefill_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> history = tokens_;
  for (int i = 0; i < n_predict; ++i) {
    const int32_t id = sampler.sample(logits_, history);
    history.push_back(id);
    ++st.generated;
    const bool more = on_token ? on_token(id) : true;
    if (!more || std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end() || i + 1 == n_predict) {
      pending_.push_back(id);  // evaluated lazily by the next call
      break;
    }
    const int32_t one[1] = {id};
    feed(one);
    ++st.decode_tokens;
  }
  st.decode_seconds = seconds_since(t0);
  return st;
}

}  // namespace sluice::runtime
