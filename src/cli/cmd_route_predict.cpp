// `sluice route-predict`: how well a prefetch one layer ahead could guess a
// token's next experts, learned from some routing traces (--train) and scored
// on others (--trace): precision and recall of each predictor of
// moe/route_predictor.h at each --depth, beside a random guess's recall
// (depth / experts). Needs no model: it answers "would a prefetch help on
// this routing" for traces of models this machine does not hold.
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/stdout_output.h"
#include "moe/route_predictor.h"
#include "moe/route_trace.h"
#include "util/error.h"
#include "util/json_text.h"

namespace sluice::cli {
namespace {

struct RoutePredictOptions {
  std::vector<std::string> train;
  std::vector<std::string> test;
  std::vector<int> depths;  // empty: 1, top-k, 2 x top-k (those within the experts)
  bool json = false;
};

void run_route_predict(const RoutePredictOptions& o) {
  const std::vector<moe::RouteTrace> train = moe::read_route_traces(o.train),
                                     test = moe::read_route_traces(o.test);
  int n_layers = 0, n_expert = 0, top_k = 0;
  for (const auto* set : {&train, &test})
    for (const moe::RouteTrace& t : *set) {
      n_layers = std::max(n_layers, t.n_layers());
      n_expert = std::max(n_expert, t.n_expert());
      top_k = std::max(top_k, t.max_top_k());
    }
  if (n_layers < 2)
    throw Error(
        "route-predict: the traces hold fewer than 2 layers; there is no next layer to predict");
  std::vector<int> depths = o.depths;
  if (depths.empty())
    for (int d : {1, top_k, 2 * top_k})
      if (d <= n_expert && std::find(depths.begin(), depths.end(), d) == depths.end())
        depths.push_back(d);
  const moe::RouteTables tables = moe::learn_route_tables(train, n_layers, n_expert);
  const std::vector<moe::PredictionScore> scores =
      moe::score_route_predictors(tables, test, depths);
  if (o.json) {
    nlohmann::json j;
    j["layers"] = n_layers;
    j["experts"] = n_expert;
    j["train_tokens"] = tables.tokens;
    j["train"] = o.train;
    j["test"] = o.test;
    j["results"] = nlohmann::json::array();
    for (const moe::PredictionScore& s : scores)
      j["results"].push_back({{"predictor", moe::route_predictor_name(s.kind)},
                              {"depth", s.depth},
                              {"positions", s.positions},
                              {"predicted", s.predicted},
                              {"actual", s.actual},
                              {"correct", s.correct},
                              {"precision", s.precision()},
                              {"recall", s.recall()},
                              {"random_recall", static_cast<double>(s.depth) / n_expert}});
    outf("%s\n", json_text(j, 2).c_str());
    return;
  }
  for (const moe::RouteTrace& t : train) outf("train %s\n", t.summary().c_str());
  for (const moe::RouteTrace& t : test) outf("test  %s\n", t.summary().c_str());
  outf(
      "predicting layer L+1's experts of every test token from what the training traces learned "
      "(%llu tokens); %llu positions (token, layer 1..%d)\n\n",
      static_cast<unsigned long long>(tables.tokens),
      static_cast<unsigned long long>(scores.empty() ? 0 : scores.front().positions), n_layers - 1);
  outf("%-15s %6s %10s %8s %14s %22s\n", "predictor", "depth", "precision", "recall",
       "random recall", "correct / routed");
  for (const moe::PredictionScore& s : scores) {
    const std::string counts = std::to_string(s.correct) + " / " + std::to_string(s.actual);
    outf("%-15s %6d %9.1f%% %7.1f%% %13.1f%% %22s\n", moe::route_predictor_name(s.kind), s.depth,
         100.0 * s.precision(), 100.0 * s.recall(), 100.0 * s.depth / n_expert, counts.c_str());
  }
}

}  // namespace

void register_route_predict(CLI::App& app) {
  auto opts = std::make_shared<RoutePredictOptions>();
  CLI::App* cmd = app.add_subcommand(
      "route-predict",
      "learn next-layer expert predictors from routing traces and score them on others");
  cmd->add_option("--train", opts->train,
                  "routing trace to learn from (any format cache-sim reads); repeatable")
      ->required();
  cmd->add_option("--trace", opts->test, "routing trace to score the predictors on; repeatable")
      ->required();
  cmd->add_option(
         "--depth", opts->depths,
         "experts predicted per (token, layer), comma separated (default: 1, top-k, 2 x top-k)")
      ->delimiter(',');
  cmd->add_flag("--json", opts->json, "print the results as JSON");
  cmd->footer(
      "Predictors: popular (the layer's most chosen experts), previous-token (what followed the "
      "previous "
      "token's experts at this layer), next-layer (what followed this token's experts at the layer "
      "before), "
      "both (the two added).\n"
      "Examples:\n"
      "  sluice route-predict --train gsm8k_2_routing.jsonl --trace humaneval_2_routing.jsonl\n"
      "  sluice run -m model.gguf -f a.txt -n 256 --route-trace a.jsonl   # then the same with "
      "b.txt\n"
      "  sluice route-predict --train a.jsonl --trace b.jsonl --depth 2,4 --json");
  cmd->callback([opts] { run_route_predict(*opts); });
}

}  // namespace sluice::cli
