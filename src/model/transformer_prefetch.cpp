// Transformer's --prefetch (the next layer's experts read ahead) and its
// --route-trace records: moved out of transformer.cpp to keep it to the
// forward pass.
#include <algorithm>
#include <string>
#include <vector>

#include "model/norm.h"
#include "model/transformer.h"
#include "moe/prediction_order.h"
#include "util/error.h"

namespace sluice::model {

int Transformer::resolve_prefetch() const {
  if (cfg_.prefetch == 0) return 0;
  const auto say = [this](const std::string& line) {
    if (cfg_.log) cfg_.log(line);
  };
  if (!hp_.is_moe()) {
    say("prefetch: off (dense model: no routed experts to read ahead)");
    return 0;
  }
  if (hp_.dsv4.hc_count > 0) {
    // The prediction reads one stream of n_embd per row; hyper-connection
    // rows hold several, and the MoE input is their learned mix.
    say("prefetch: off (deepseek4's hyper-connections: no prediction of the next layer's experts yet)");
    return 0;
  }
  if (cfg_.load_all) {
    say("prefetch: off (--load-all keeps every expert resident)");
    return 0;
  }
  if (cfg_.trims.drop_cold > 0.0f && (cfg_.cache_auto || cfg_.cache_bytes > 0)) {
    // drop-cold routes by what the cache holds; prefetched (possibly
    // mispredicted) experts would change that, and with it the results.
    say("prefetch: off (--drop-cold-experts with an expert cache: prefetching would change what is "
        "cached, "
        "and so which experts are dropped)");
    return 0;
  }
  prefetch_depth_for_batch(cfg_.prefetch, moe_k_, 1);  // Error for a setting it does not know
  return cfg_.prefetch;
}

void Transformer::start_prefetch(int il, int T, int depth) {
  const int nl = il + 1;
  if (nl >= static_cast<int>(hp_.n_layer) || !layers_[nl].moe) return;  // trunk layers only
  const Layer& next = layers_[nl];
  const int64_t n_embd = hp_.n_embd;
  const int n_expert = static_cast<int>(hp_.n_expert);
  try {
    std::vector<int> experts;
    if (replay_) {
      // The replay knows layer nl's routing of these positions: its first
      // `depth` slots are the most weighted, as the router's would be.
      experts.reserve(static_cast<size_t>(T) * depth);
      for (int t = 0; t < T; ++t) {
        const int32_t* row = replay_->experts(tokens_evaluated_ + static_cast<uint64_t>(t), nl);
        experts.insert(experts.end(), row, row + depth);
      }
    } else {
      // x_ is layer il's hidden state after attention; layer nl will route
      // rms_norm(x after its own attention): the prediction skips il's FFN and
      // nl's attention, both residual updates.
      pf_xn_.resize(static_cast<size_t>(T) * n_embd);
      rms_norm_rows(x_.data(), next.ffn_norm, T, n_embd, hp_.rms_eps, pf_xn_.data());
      router_logits(next, pf_xn_.data(), T, pf_logits_);
      // Each position's `depth` most probable experts (slot order is
      // descending weight), so the reads that fill the lanes' idle time are
      // the predictions most likely to be right.
      route_topk(next.desc->ffn.router, next.selection_bias, pf_logits_.data(), T, n_expert, depth,
                 pf_routing_);
      experts.assign(pf_routing_.experts.begin(), pf_routing_.experts.end());
    }
    // Distinct experts, most probable first: the reads queue in this order
    // and only some lanes run guesses, so the likeliest are read first.
    // Predicted uses per distinct expert decide which streamed ones come packed.
    const std::vector<moe::PredictedExpert> order = moe::order_predictions(experts, depth);
    experts.clear();
    std::vector<uint8_t> pack;
    for (const moe::PredictedExpert& p : order) {
      experts.push_back(p.expert);
      pack.push_back(static_cast<size_t>(p.uses) >= kMinUsesToPackStreamed);
    }
    moe::FetchOptions opt;
    opt.transform_streamed = pack;
    opt.speculative = true;  // a wrong guess must not evict or promote anything
    moe::ExpertStore::Batch batch = store_->fetch(nl, experts, opt);
    std::vector<uint8_t> hit = store_->last_fetch(nl).hit;
    hit.resize(experts.size(), 0);
    prefetch_.emplace(PrefetchedExperts{nl, std::move(experts), std::move(hit), std::move(batch)});
  } catch (const std::exception&) {
    prefetch_.reset();  // a prediction is optional: layer nl fetches what it needs itself
  }
}

void Transformer::record_route(int il, std::span<const RowSegment> segs) {
  // The batch fetched the union of the tokens' experts once: a token's expert
  // was a hit when that fetch served it from the cache.
  const moe::ExpertStore::FetchRecord& f = moe_ffn_.served();
  for (const RowSegment& sg : segs)
    for (int t = sg.row0; t < sg.row0 + sg.n; ++t) {
      moe::RouteRecord r;
      r.pos = sg.pos0 + (t - sg.row0);
      r.layer = il;
      for (const moe::ExpertWeight& ew : routes_.row(t)) {  // after trims
        const int e = ew.expert;
        r.experts.push_back(e);
        r.weights.push_back(ew.weight);
        const auto it = std::find(f.experts.begin(), f.experts.end(), e);
        r.hit.push_back(it != f.experts.end() &&
                        f.hit[static_cast<size_t>(it - f.experts.begin())] != 0);
      }
      trace_buf_.push_back(std::move(r));
    }
}

}  // namespace sluice::model
