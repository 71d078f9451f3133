// Next-layer expert prediction learned from routing traces, and its score.
//
// A prefetch one layer ahead must name layer L+1's experts of a token while
// layer L runs. The engine's own predictor (model/transformer_prefetch.cpp)
// applies L+1's router to L's hidden state; it needs the weights and the
// hidden states, so it cannot be measured on a trace of a real model whose
// weights this machine does not hold. The predictors here need only routes:
// they are learned from one set of traces and scored on another, so their
// recall on real routing (the Mixtral traces in shared/data/routing) can be
// set beside a published figure.
//
// Learned tables (counts over every token of the training traces):
//  - layer:  how often a token chose e at layer L and e' at layer L+1;
//  - token:  how often e was chosen at layer L for token t-1 and e' at layer L
//            for token t of the same sequence (consecutive positions);
//  - popular: how often e' was chosen at layer L.
// Predictors, each giving `depth` experts for (token t, layer L+1), L >= 0:
//  Popular        L+1's most chosen experts (a static guess).
//  PreviousToken  score(e') = sum over t-1's experts e at L+1 of P(e' | e), the
//                 token table of L+1 (what consecutive tokens share).
//  NextLayer      score(e') = sum over t's experts e at L of P(e' at L+1 | e at L),
//                 the layer table (what a token's layers share).
//  Both           the two sums added.
// P(e' | e) = count(e, e') / count(e); an e never seen in training adds
// nothing. Ties: the more popular e' at L+1, then the lower id, so a
// prediction depends only on the tables and the evidence.
//
// Scored positions: every (token, L+1) with records at L and L+1 (so every
// predictor is scored on the same set); a token whose t-1 is absent gets no
// token evidence (its PreviousToken guess is the popular one).
//
// Pure computation; thread-safe for distinct calls.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "moe/route_trace.h"

namespace sluice::moe {

enum class RoutePredictorKind { Popular, PreviousToken, NextLayer, Both };
const char* route_predictor_name(
    RoutePredictorKind k);  // "popular", "previous-token", "next-layer", "both"
inline constexpr RoutePredictorKind kRoutePredictorKinds[] = {
    RoutePredictorKind::Popular, RoutePredictorKind::PreviousToken, RoutePredictorKind::NextLayer,
    RoutePredictorKind::Both};

struct RouteTables {
  int n_layers = 0;
  int n_expert = 0;
  std::vector<uint32_t> layer;    // [L][e][e'], L < n_layers - 1
  std::vector<uint32_t> token;    // [L][e][e']
  std::vector<uint32_t> popular;  // [L][e]
  uint64_t tokens = 0;            // training tokens
};

// The tables' size is 2 x n_layers x n_expert^2 counts: 126 MiB for 60
// layers of 512 experts. A trace names both (its largest layer and expert
// id), so they are checked against this before anything is allocated.
inline constexpr uint64_t kMaxRouteTableBytes = uint64_t{1} << 30;

// Learns the tables from `traces` for a model of n_layers x n_expert.
// Error naming the trace when one routes to a layer or expert outside them,
// and naming the sizes when the tables would exceed kMaxRouteTableBytes.
RouteTables learn_route_tables(std::span<const RouteTrace> traces, int n_layers, int n_expert);

struct PredictionScore {
  RoutePredictorKind kind = RoutePredictorKind::Popular;
  int depth = 0;
  uint64_t positions = 0;    // (token, layer) pairs predicted
  uint64_t predicted = 0;    // experts named (positions x depth)
  uint64_t actual = 0;       // experts the positions routed to
  uint64_t correct = 0;      // named and routed to
  double precision() const;  // correct / predicted (0 when none)
  double recall() const;     // correct / actual (0 when none)
};

// Scores `kind` at `depth` (1..n_expert) on `traces`. Error naming the trace
// when one routes outside the tables' layers or experts, or naming --depth
// when depth is out of range.
PredictionScore score_route_predictor(const RouteTables& tables, std::span<const RouteTrace> traces,
                                      RoutePredictorKind kind, int depth);

// Every kind of kRoutePredictorKinds at every depth (depth-major, kinds in
// their order), in one pass over the traces. Errors as above.
std::vector<PredictionScore> score_route_predictors(const RouteTables& tables,
                                                    std::span<const RouteTrace> traces,
                                                    std::span<const int> depths);

// The prediction itself (exposed for tests): `depth` experts of layer
// `layer` (>= 1), best first, from t's experts at layer - 1 and t-1's at
// `layer` (empty when unknown).
std::vector<int> predict_next_layer(const RouteTables& tables, RoutePredictorKind kind, int layer,
                                    std::span<const int> this_token_prev_layer,
                                    std::span<const int> prev_token_this_layer, int depth);

}  // namespace sluice::moe
