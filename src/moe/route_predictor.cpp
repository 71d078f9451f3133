#include "moe/route_predictor.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

#include "util/error.h"

namespace sluice::moe {
namespace {

// One token's experts per layer (nullptr: no record for that layer).
using LayerRoutes = std::vector<const std::vector<int>*>;
using TokenKey = std::pair<int, int64_t>;  // (seq, pos)

// Every token of `t`, keyed by (seq, pos); checks layers and expert ids.
std::map<TokenKey, LayerRoutes> tokens_of(const RouteTrace& t, int n_layers, int n_expert) {
  std::map<TokenKey, LayerRoutes> out;
  for (const RouteRecord& r : t.records) {
    if (r.layer < 0 || r.layer >= n_layers)
      throw Error(t.source + ": layer " + std::to_string(r.layer) + " is outside the " +
                  std::to_string(n_layers) + " layers the predictor was learned for");
    for (int e : r.experts)
      if (e < 0 || e >= n_expert)
        throw Error(t.source + ": expert " + std::to_string(e) + " at layer " +
                    std::to_string(r.layer) + " is outside the " + std::to_string(n_expert) +
                    " experts the predictor was learned for");
    LayerRoutes& l = out[{r.seq, r.pos}];
    l.resize(static_cast<size_t>(n_layers), nullptr);
    l[static_cast<size_t>(r.layer)] = &r.experts;
  }
  return out;
}

const LayerRoutes* previous_token(const std::map<TokenKey, LayerRoutes>& tokens,
                                  const TokenKey& k) {
  const auto it = tokens.find({k.first, k.second - 1});
  return it == tokens.end() ? nullptr : &it->second;
}

size_t cell(int layer, int n_expert, int from, int to) {
  return (static_cast<size_t>(layer) * static_cast<size_t>(n_expert) + static_cast<size_t>(from)) *
             static_cast<size_t>(n_expert) +
         static_cast<size_t>(to);
}

// Adds P(e' | e) for every evidence expert e to score[e'].
void add_conditional(const std::vector<uint32_t>& table, int layer, int n_expert,
                     std::span<const int> evidence, std::vector<double>& score) {
  for (int e : evidence) {
    const uint32_t* row = &table[cell(layer, n_expert, e, 0)];
    const double n = std::accumulate(row, row + n_expert, 0.0);
    if (n <= 0) continue;
    for (int to = 0; to < n_expert; ++to) score[static_cast<size_t>(to)] += row[to] / n;
  }
}

}  // namespace

const char* route_predictor_name(RoutePredictorKind k) {
  switch (k) {
    case RoutePredictorKind::Popular:
      return "popular";
    case RoutePredictorKind::PreviousToken:
      return "previous-token";
    case RoutePredictorKind::NextLayer:
      return "next-layer";
    case RoutePredictorKind::Both:
      return "both";
  }
  return "?";
}

RouteTables learn_route_tables(std::span<const RouteTrace> traces, int n_layers, int n_expert) {
  if (n_layers < 2 || n_expert < 1)
    throw Error("route predictor: needs at least 2 layers and 1 expert");
  const uint64_t square = static_cast<uint64_t>(n_expert) * static_cast<uint64_t>(n_expert);
  const uint64_t bytes =
      (2 * static_cast<uint64_t>(n_layers) * square + static_cast<uint64_t>(n_layers) * n_expert) *
      sizeof(uint32_t);
  if (bytes > kMaxRouteTableBytes)
    throw Error(
        "route predictor: " + std::to_string(n_layers) + " layers x " + std::to_string(n_expert) +
        " experts (the traces' largest layer and expert id) need " + std::to_string(bytes >> 20) +
        " MiB of tables, above the " + std::to_string(kMaxRouteTableBytes >> 20) + " MiB limit");
  RouteTables t;
  t.n_layers = n_layers;
  t.n_expert = n_expert;
  t.layer.assign(static_cast<size_t>(n_layers - 1) * square, 0);
  t.token.assign(static_cast<size_t>(n_layers) * square, 0);
  t.popular.assign(static_cast<size_t>(n_layers) * static_cast<size_t>(n_expert), 0);
  for (const RouteTrace& trace : traces) {
    const auto tokens = tokens_of(trace, n_layers, n_expert);
    for (const auto& [key, routes] : tokens) {
      ++t.tokens;
      const LayerRoutes* prev = previous_token(tokens, key);
      for (int l = 0; l < n_layers; ++l) {
        const std::vector<int>* here = routes[static_cast<size_t>(l)];
        if (!here) continue;
        for (int e : *here)
          t.popular[static_cast<size_t>(l) * static_cast<size_t>(n_expert) + e] += 1;
        if (l + 1 < n_layers && routes[static_cast<size_t>(l + 1)])
          for (int from : *here)
            for (int to : *routes[static_cast<size_t>(l + 1)])
              t.layer[cell(l, n_expert, from, to)] += 1;
        if (prev && (*prev)[static_cast<size_t>(l)])
          for (int from : *(*prev)[static_cast<size_t>(l)])
            for (int to : *here) t.token[cell(l, n_expert, from, to)] += 1;
      }
    }
  }
  return t;
}

std::vector<int> predict_next_layer(const RouteTables& t, RoutePredictorKind kind, int layer,
                                    std::span<const int> this_token_prev_layer,
                                    std::span<const int> prev_token_this_layer, int depth) {
  if (layer < 1 || layer >= t.n_layers)
    throw Error("route predictor: layer " + std::to_string(layer) +
                " has no layer before it in the tables");
  const int n = t.n_expert;
  std::vector<double> score(static_cast<size_t>(n), 0.0);
  if (kind == RoutePredictorKind::PreviousToken || kind == RoutePredictorKind::Both)
    add_conditional(t.token, layer, n, prev_token_this_layer, score);
  if (kind == RoutePredictorKind::NextLayer || kind == RoutePredictorKind::Both)
    add_conditional(t.layer, layer - 1, n, this_token_prev_layer, score);
  const uint32_t* popular = &t.popular[static_cast<size_t>(layer) * static_cast<size_t>(n)];
  std::vector<int> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  const auto k = static_cast<size_t>(std::clamp(depth, 0, n));
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                    [&](int a, int b) {
                      if (score[static_cast<size_t>(a)] != score[static_cast<size_t>(b)])
                        return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)];
                      if (popular[a] != popular[b]) return popular[a] > popular[b];
                      return a < b;
                    });
  ids.resize(k);
  return ids;
}

double PredictionScore::precision() const {
  return predicted ? static_cast<double>(correct) / static_cast<double>(predicted) : 0.0;
}
double PredictionScore::recall() const {
  return actual ? static_cast<double>(correct) / static_cast<double>(actual) : 0.0;
}

namespace {

void check_depth(const RouteTables& tables, int depth) {
  if (depth < 1 || depth > tables.n_expert)
    throw Error("--depth: " + std::to_string(depth) + " is outside 1.." +
                std::to_string(tables.n_expert) + " (the experts per layer)");
}

// Scores every entry of `scores` (kind and depth set, counts zero) in one
// pass: each trace's token index is built once for all of them.
void score_into(const RouteTables& tables, std::span<const RouteTrace> traces,
                std::span<PredictionScore> scores) {
  for (const PredictionScore& s : scores) check_depth(tables, s.depth);
  for (const RouteTrace& trace : traces) {
    const auto tokens = tokens_of(trace, tables.n_layers, tables.n_expert);
    for (const auto& [key, routes] : tokens) {
      const LayerRoutes* prev = previous_token(tokens, key);
      for (int l = 1; l < tables.n_layers; ++l) {
        const std::vector<int>* before = routes[static_cast<size_t>(l - 1)];
        const std::vector<int>* here = routes[static_cast<size_t>(l)];
        if (!before || !here) continue;
        const std::vector<int>* prev_here = prev ? (*prev)[static_cast<size_t>(l)] : nullptr;
        const std::span<const int> prev_evidence =
            prev_here ? std::span<const int>(*prev_here) : std::span<const int>();
        // One ranking per kind, to the deepest depth asked: the order is
        // total (ties by popularity, then id), so a shallower guess is its prefix.
        for (RoutePredictorKind k : kRoutePredictorKinds) {
          int deepest = 0;
          for (const PredictionScore& s : scores)
            if (s.kind == k) deepest = std::max(deepest, s.depth);
          if (deepest == 0) continue;
          const std::vector<int> ranking =
              predict_next_layer(tables, k, l, *before, prev_evidence, deepest);
          for (PredictionScore& s : scores) {
            if (s.kind != k) continue;
            const auto guess = std::span<const int>(ranking).first(static_cast<size_t>(s.depth));
            ++s.positions;
            s.predicted += guess.size();
            s.actual += here->size();
            for (int e : guess)
              s.correct += static_cast<uint64_t>(std::count(here->begin(), here->end(), e) > 0);
          }
        }
      }
    }
  }
}

}  // namespace

PredictionScore score_route_predictor(const RouteTables& tables, std::span<const RouteTrace> traces,
                                      RoutePredictorKind kind, int depth) {
  PredictionScore s{kind, depth};
  score_into(tables, traces, std::span<PredictionScore>(&s, 1));
  return s;
}

std::vector<PredictionScore> score_route_predictors(const RouteTables& tables,
                                                    std::span<const RouteTrace> traces,
                                                    std::span<const int> depths) {
  std::vector<PredictionScore> scores;
  for (int d : depths)
    for (RoutePredictorKind k : kRoutePredictorKinds) scores.push_back(PredictionScore{k, d});
  score_into(tables, traces, scores);
  return scores;
}

}  // namespace sluice::moe
