// --prefetch (ModelConfig::prefetch): the next MoE layer's predicted experts
// are read while the current layer computes. It must never change results, its
// counters must add up, and a failed prefetch read must neither crash, hang,
// nor change the outcome: a needed expert is read again, an unneeded one is
// ignored.
//
// Models: the synthesized golden qwen3moe cases (golden/README.md) and the
// trained stories-moe-8x (5 layers, 8 experts, top-2; Q8_0 experts of
// 39168 bytes, see telemetry_test.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/engine_flags.h"
#include "io/fault_file.h"
#include "model/arch.h"
#include "case_name.h"
#include "model_test_support.h"
#include "runtime/session.h"
#include "telemetry/telemetry.h"
#include "util/error.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

const char* const kStoriesQ8 = "models/stories-moe-8x-q8_0.gguf";
constexpr uint64_t kStoriesExpertBytes = 3 * (64 * 192 / 32 * 34);
const std::vector<int32_t> kStoriesPrompt = {1, 403, 407, 261, 378};  // "Once upon a time" with BOS

std::vector<int32_t> golden_tokens(const std::string& name) {
  std::ifstream jf(shared_path("golden/" + name + ".json"));
  return nlohmann::json::parse(jf)["tokens"].get<std::vector<int32_t>>();
}



model::ModelConfig base_config() {
  model::ModelConfig c = golden_config();
  c.odirect = false;  // buffered: exact bytes, cheap
  return c;
}

struct Variant {
  std::string what;
  model::ModelConfig cfg;
};

// The knobs prefetch must not interact with.
// expert_bytes: one expert of the model, for a cache that must evict.
// The most experts a position can route to: all of them, or those of the
// groups a group-limited router (DeepSeek-V3) lets compete.
int max_top_k(const std::string& path) {
  const model::ArchDesc d = model::describe_architecture(gguf::GgufModel::open(path));
  int k = static_cast<int>(d.hp.n_expert);
  for (const model::LayerDesc& l : d.layers) {
    const model::RouterDesc& r = l.ffn.router;
    if (l.ffn.kind == model::FfnKind::Moe && r.n_group_used > 0 && r.n_group_used < r.n_group)
      k = std::min(k, static_cast<int>(d.hp.n_expert / r.n_group * r.n_group_used));
  }
  return k;
}

std::vector<Variant> variants(const model::HParams& hp, uint64_t expert_bytes, int max_k) {
  std::vector<Variant> v;
  auto add = [&](const std::string& what, auto&& set) {
    model::ModelConfig c = base_config();
    set(c);
    v.push_back({what, c});
  };
  add("cache off", [](model::ModelConfig&) {});
  add("odirect", [](model::ModelConfig& c) { c.odirect = true; });
  add("io-threads 1", [](model::ModelConfig& c) { c.io_threads = 1; });
  add("io-threads 8", [](model::ModelConfig& c) { c.io_threads = 8; });
  add("threads 1", [](model::ModelConfig& c) { c.threads = 1; });
  add("threads 3", [](model::ModelConfig& c) { c.threads = 3; });
  add("ubatch 1", [](model::ModelConfig& c) { c.ubatch = 1; });
  add("ubatch 3", [](model::ModelConfig& c) { c.ubatch = 3; });
  add("cache 64 MiB", [](model::ModelConfig& c) { c.cache_bytes = uint64_t{64} << 20; });
  // Room for a few layers' experts only (aligned covers add up to 3 pages each).
  const uint64_t tight = 3 * hp.n_expert_used * (expert_bytes + 3 * 4096);
  add("cache tight", [tight](model::ModelConfig& c) { c.cache_bytes = tight; });
  add("load-all", [](model::ModelConfig& c) { c.load_all = true; });
  add("top-p 0.6", [](model::ModelConfig& c) { c.trims.top_p = 0.6f; });
  add("expert budget 3 ubatch 4", [](model::ModelConfig& c) {
    c.trims.expert_budget = 3;
    c.ubatch = 4;
  });
  add("moe-top-k 1", [](model::ModelConfig& c) { c.trims.top_k = 1; });
  add("moe-top-k all", [max_k](model::ModelConfig& c) { c.trims.top_k = max_k; });
  add("drop-cold, cache off", [](model::ModelConfig& c) { c.trims.drop_cold = 0.3f; });
  add("drop-cold, cache 64 MiB", [](model::ModelConfig& c) {
    c.trims.drop_cold = 0.3f;
    c.cache_bytes = uint64_t{64} << 20;
  });
  return v;
}

void expect_balanced(const model::ModelStats& s, const std::string& what) {
  EXPECT_EQ(s.experts.routed, s.experts.hit + s.experts.read + s.experts.dropped) << what;
  const model::PrefetchCounters& p = s.prefetch_counters;
  EXPECT_EQ(p.experts, p.used + p.wasted) << what;
  EXPECT_LE(p.used, p.needed) << what;
  EXPECT_LE(p.read_ahead, p.used) << what;
  EXPECT_EQ(p.failed, 0u) << what;
}

class PrefetchInvariance : public ::testing::TestWithParam<std::string> {};

TEST_P(PrefetchInvariance, LogitsAreBitIdenticalWithPrefetchOnAndOff) {
  const std::string rel = GetParam();
  REQUIRE_SHARED(rel);
  const std::string path = shared_path(rel);
  const bool golden = rel.rfind("golden/", 0) == 0;
  const std::vector<int32_t> prompt =
      golden ? golden_tokens(rel.substr(7, rel.size() - 7 - 5)) : kStoriesPrompt;
  auto probe = load(path, base_config());
  const model::HParams hp = probe->hparams();
  const int last_layer = static_cast<int>(hp.n_layer) - 1;  // a MoE layer in every model here
  int nth = 0;
  const int max_k = max_top_k(path);
  for (const Variant& v : variants(hp, probe->expert_bytes(last_layer), max_k)) {
    model::ModelConfig off = v.cfg, on = v.cfg;
    off.prefetch = 0;
    // Depth alternates between every predicted expert (capped at the top-k)
    // and the single most probable one, so both ends run in every model.
    const bool full_depth = nth++ % 2 == 0;
    on.prefetch = full_depth ? 1024 : 1;
    auto m_off = load(path, off);
    auto m_on = load(path, on);
    const auto a = prefill_and_decode(*m_off, prompt, 6);
    const auto b = prefill_and_decode(*m_on, prompt, 6);
    EXPECT_TRUE(same_bits(a, b)) << rel << ": " << v.what;
    const model::ModelStats s = m_on->stats();
    EXPECT_EQ(m_off->stats().prefetch, 0) << v.what;
    EXPECT_EQ(m_off->stats().prefetch_counters.experts, 0u) << v.what;
    expect_balanced(s, rel + ": " + v.what);
    const bool expect_on = !v.cfg.load_all && !(v.cfg.trims.drop_cold > 0 && v.cfg.cache_bytes > 0);
    const int k = moe::effective_top_k(v.cfg.trims, static_cast<int>(hp.n_expert_used), static_cast<int>(hp.n_expert));
    EXPECT_EQ(s.prefetch, expect_on ? (full_depth ? k : 1) : 0) << v.what;
    if (!expect_on) {
      EXPECT_EQ(s.prefetch_counters.experts, 0u) << v.what;
      continue;
    }
    EXPECT_GT(s.prefetch_counters.used, 0u) << v.what << ": the prefetched experts were never used";
    if (v.what == "cache tight") {
      EXPECT_GT(s.io.cache_evictions, 0u) << "the tight cache must evict";
    }
    // Every MoE layer that follows a MoE layer had a prefetch (the previous
    // layer's experts start it), once per ubatch.
    const uint64_t ubatches_prefill = (prompt.size() + v.cfg.ubatch - 1) / v.cfg.ubatch;
    uint64_t predicted_layers = 0;
    for (uint32_t l = 1; l < hp.n_layer; ++l)
      predicted_layers += probe->expert_bytes(static_cast<int>(l)) > 0 && probe->expert_bytes(static_cast<int>(l) - 1) > 0;
    EXPECT_EQ(s.prefetch_counters.layers, (ubatches_prefill + 6) * predicted_layers) << v.what;
    // The routing is the same with prefetch on and off, so are the routed experts.
    EXPECT_EQ(s.experts.routed, m_off->stats().experts.routed) << v.what;
    EXPECT_EQ(s.experts.dropped, m_off->stats().experts.dropped) << v.what;
    if (full_depth && v.cfg.trims.top_k == static_cast<int>(hp.n_expert)) {  // every expert routed
      // Every expert is predicted and every expert is needed: nothing wasted.
      EXPECT_EQ(s.prefetch_counters.used, s.prefetch_counters.needed) << v.what;
      EXPECT_EQ(s.prefetch_counters.wasted, 0u) << v.what;
      EXPECT_EQ(s.prefetch_counters.wasted_bytes, 0u) << v.what;
    }
    if (v.what == "cache 64 MiB") {
      // Every expert fits. A prediction is speculative: a wrong guess is
      // neither cached nor counted, so the cache serves exactly the hits and
      // reads it serves without prefetch.
      EXPECT_EQ(s.io.cache_evictions, 0u);
      EXPECT_EQ(s.experts.hit, m_off->stats().experts.hit) << rel;
      EXPECT_EQ(s.experts.read, m_off->stats().experts.read) << rel;
      EXPECT_EQ(s.io.experts_hit, m_off->stats().io.experts_hit) << rel;
      EXPECT_EQ(s.io.experts_read - s.io.experts_unused, m_off->stats().io.experts_read) << rel;
    }
    if (v.cfg.cache_bytes == 0) {
      EXPECT_EQ(s.prefetch_counters.read_ahead, s.prefetch_counters.used) << v.what;  // nothing is cached
      // Cache off: every used expert was read, and io.experts_read also holds
      // the wasted reads that ran (a queued one is cancelled with its batch).
      EXPECT_EQ(s.experts.hit, 0u) << v.what;
      EXPECT_GE(s.io.experts_read, s.experts.read) << v.what;
      EXPECT_LE(s.io.experts_read, s.experts.read + s.prefetch_counters.wasted) << v.what;
      EXPECT_EQ(s.prefetch_counters.wasted_bytes, s.prefetch_counters.wasted * m_on->expert_bytes(last_layer)) << v.what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PrefetchInvariance,
                         ::testing::Values("golden/qwen3moe-q8_0-q4_0.gguf", "golden/qwen3moe-kquants.gguf",
                                           "golden/gpt-oss-mxfp4.gguf", "golden/deepseek2-q4_k.gguf",
                                           "golden/qwen35moe-kquants.gguf", "golden/gemma4-kquants.gguf", kStoriesQ8),
                         CaseName());

// Decode with the model's top-k: one token, k experts predicted and k needed
// per layer, so the counters follow from the layer count alone.
TEST(Prefetch, DecodeCountersAreExact) {
  REQUIRE_SHARED(kStoriesQ8);
  model::ModelConfig cfg = base_config();
  cfg.prefetch = model::kPrefetchAuto;  // half the top-k of 2: the most probable expert
  cfg.ubatch = 1;  // one position per micro-batch throughout
  {
    auto m = load(shared_path(kStoriesQ8), cfg);
    ASSERT_EQ(m->stats().prefetch, 1);
    prefill_and_decode(*m, kStoriesPrompt, 7);
    const model::PrefetchCounters& p = m->stats().prefetch_counters;
    const uint64_t layers = (kStoriesPrompt.size() + 7) * (m->hparams().n_layer - 1);
    EXPECT_EQ(p.layers, layers);
    EXPECT_EQ(p.experts, layers);  // one prediction per layer
    EXPECT_EQ(p.needed, layers * m->hparams().n_expert_used);
    EXPECT_EQ(p.used + p.wasted, p.experts);
    EXPECT_DOUBLE_EQ(p.precision(), static_cast<double>(p.used) / static_cast<double>(layers));
    EXPECT_LE(p.coverage(), 0.5);  // at most 1 of the 2 needed experts per layer
  }
  cfg.prefetch = 2;
  cfg.ubatch = 1;  // one position per micro-batch throughout
  auto m = load(shared_path(kStoriesQ8), cfg);
  const auto& hp = m->hparams();
  ASSERT_EQ(m->expert_bytes(1), kStoriesExpertBytes);
  prefill_and_decode(*m, kStoriesPrompt, 7);
  const model::ModelStats s = m->stats();
  const model::PrefetchCounters& p = s.prefetch_counters;
  const uint64_t positions = kStoriesPrompt.size() + 7;
  EXPECT_EQ(p.layers, positions * (hp.n_layer - 1));
  EXPECT_EQ(p.experts, p.layers * hp.n_expert_used);
  EXPECT_EQ(p.needed, p.layers * hp.n_expert_used);
  EXPECT_EQ(p.used + p.wasted, p.experts);
  EXPECT_EQ(p.wasted_bytes, p.wasted * kStoriesExpertBytes);
  EXPECT_GT(p.used, 0u);  // a trained model's next router agrees at times
  EXPECT_EQ(s.experts.read, positions * hp.n_layer * hp.n_expert_used);  // cache off: every used expert read
  EXPECT_DOUBLE_EQ(p.coverage(), static_cast<double>(p.used) / static_cast<double>(p.needed));
  EXPECT_DOUBLE_EQ(p.precision(), static_cast<double>(p.used) / static_cast<double>(p.experts));
}

// ---- failed reads ------------------------------------------------------------

struct FaultRun {
  bool threw = false;
  std::string error;
  std::vector<float> logits;
  model::PrefetchCounters prefetch;
  uint64_t reads = 0;  // read calls the expert file saw
};

// One prefill of `tokens` with the `nth` expert read failing (once, or that
// read and every later one). One read lane: reads run in submission order.
FaultRun run_with_fault(const std::string& path, const std::vector<int32_t>& tokens, bool prefetch, uint64_t nth,
                        bool sticky) {
  model::ModelConfig cfg = base_config();
  cfg.io_threads = 1;
  cfg.prefetch = prefetch ? 2 : 0;  // every predicted expert of the top-2
  auto files = std::make_shared<std::vector<std::shared_ptr<io::FaultFile>>>();
  cfg.wrap_expert_file = [nth, sticky, files](std::shared_ptr<const io::File> f) -> std::shared_ptr<const io::File> {
    io::FaultPlan plan;
    plan.fail_read = nth;
    plan.fail_every_after = sticky;
    files->push_back(std::make_shared<io::FaultFile>(std::move(f), plan));
    return files->back();
  };
  auto m = load(path, cfg);
  FaultRun r;
  try {
    r.logits = eval_all(*m, tokens);
  } catch (const Error& e) {
    r.threw = true;
    r.error = e.what();
  }
  r.prefetch = m->stats().prefetch_counters;
  EXPECT_EQ(files->size(), 1u);  // buffered reads of a single-file model
  for (const auto& f : *files) r.reads += f->calls();
  // A failed eval keeps no new positions.
  EXPECT_EQ(m->n_past(), r.threw ? 0 : static_cast<int>(tokens.size()));
  return r;
}

TEST(Prefetch, AFailedPrefetchReadIsReadAgainOrIgnored) {
  REQUIRE_SHARED(kStoriesQ8);
  const std::string path = shared_path(kStoriesQ8);
  const std::vector<int32_t> one = {kStoriesPrompt[0]};
  const FaultRun clean = run_with_fault(path, one, false, 0, false);
  ASSERT_FALSE(clean.threw) << clean.error;
  // One token, 5 layers, 2 experts, 3 reads per expert (gate/up/down are in
  // separate tensors): 30 reads without prefetch. With it, 4 layers x 2
  // experts x 3 = 24 prefetch reads, and layers 1-4 read only what was not
  // predicted. One lane runs them in submission order, and every prefetch
  // read runs (its layer's own reads queue behind it, and are waited for).
  ASSERT_EQ(clean.reads, 30u);
  const FaultRun clean_on = run_with_fault(path, one, true, 0, false);
  ASSERT_FALSE(clean_on.threw) << clean_on.error;
  ASSERT_TRUE(same_bits(clean_on.logits, clean.logits));
  const uint64_t own_reads = 30 - 3 * clean_on.prefetch.used;
  ASSERT_EQ(clean_on.reads, own_reads + 24);
  uint64_t tolerated = 0, reread = 0;
  for (uint64_t nth = 1; nth <= clean_on.reads; ++nth) {
    const std::string where = "read " + std::to_string(nth);
    if (nth <= 30) {
      const FaultRun off = run_with_fault(path, one, false, nth, false);
      EXPECT_TRUE(off.threw) << where << ": every read is needed without prefetch";
      EXPECT_NE(off.error.find("Input/output error"), std::string::npos) << off.error;
    }
    const FaultRun on = run_with_fault(path, one, true, nth, false);
    if (on.threw) {  // one of a layer's own reads: fails as without prefetch
      EXPECT_NE(on.error.find("Input/output error"), std::string::npos) << where << ": " << on.error;
      EXPECT_NE(on.error.find("layer"), std::string::npos) << where << ": " << on.error;
      continue;
    }
    // The failure hit a prefetch read: same logits as a clean run.
    EXPECT_TRUE(same_bits(on.logits, clean.logits)) << where;
    EXPECT_EQ(on.prefetch.experts, on.prefetch.used + on.prefetch.wasted) << where;
    EXPECT_LE(on.prefetch.failed, on.prefetch.needed) << where;
    ++tolerated;
    reread += on.prefetch.failed;
  }
  EXPECT_EQ(tolerated, 24u) << "every failed prefetch read is tolerated, every failed own read is not";
  // A batch reports its error before its ready experts, so a failed read of a
  // mispredicted expert, too, makes the needed experts not yet taken from that
  // prefetch be read again (unless they were all taken before the failure).
  EXPECT_GT(reread, 0u) << "no needed prefetched expert was read again";
}

TEST(Prefetch, PersistentFaultsSurfaceAsErrorsWithoutHanging) {
  REQUIRE_SHARED(kStoriesQ8);
  const std::string path = shared_path(kStoriesQ8);
  for (uint64_t nth : {1, 7, 13, 40}) {
    for (bool prefetch : {false, true}) {
      const FaultRun r = run_with_fault(path, kStoriesPrompt, prefetch, nth, true);
      EXPECT_TRUE(r.threw) << "read " << nth << (prefetch ? " prefetch" : "");
      EXPECT_NE(r.error.find("Input/output error"), std::string::npos) << r.error;
    }
  }
}

TEST(Prefetch, OffWhereItCannotHelpOrCouldChangeResults) {
  REQUIRE_SHARED(kStoriesQ8);
  std::vector<std::string> log;
  model::ModelConfig cfg = base_config();
  cfg.prefetch = model::kPrefetchAuto;
  cfg.log = [&log](const std::string& l) { log.push_back(l); };
  cfg.load_all = true;
  EXPECT_EQ(load(shared_path(kStoriesQ8), cfg)->stats().prefetch, 0);
  cfg.load_all = false;
  cfg.trims.drop_cold = 0.2f;
  cfg.cache_bytes = uint64_t{16} << 20;
  EXPECT_EQ(load(shared_path(kStoriesQ8), cfg)->stats().prefetch, 0);
  cfg.cache_bytes = 0;  // cache off: is_cached is false for every expert, prefetch or not
  EXPECT_EQ(load(shared_path(kStoriesQ8), cfg)->stats().prefetch, 1);
  std::string all;
  for (const std::string& l : log) all += l + "\n";
  EXPECT_NE(all.find("prefetch: off (--load-all"), std::string::npos) << all;
  EXPECT_NE(all.find("prefetch: off (--drop-cold-experts"), std::string::npos) << all;
  if (exists(shared_path("models/stories260k-f32.gguf"))) {
    EXPECT_EQ(load(shared_path("models/stories260k-f32.gguf"), cfg)->stats().prefetch, 0);  // dense
  }
}

// Route traces describe the routing (identical) and whether the cache served
// each expert; with the cache off nothing is a hit, prefetched or not.
TEST(Prefetch, RouteTraceIsUnchangedWithTheCacheOff) {
  REQUIRE_SHARED(kStoriesQ8);
  auto trace_of = [](int prefetch) {
    const std::string path =
        (std::filesystem::temp_directory_path() / ("sluice_prefetch_trace_" + std::to_string(prefetch) + "_" +
                                                   std::to_string(::getpid()) + ".jsonl"))
            .string();
    model::ModelConfig cfg = base_config();
    cfg.prefetch = prefetch;
    cfg.route_trace = std::make_shared<moe::RouteTraceWriter>(path);
    {
      auto m = load(shared_path(kStoriesQ8), cfg);
      prefill_and_decode(*m, kStoriesPrompt, 4);
    }
    cfg.route_trace->close();
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    std::filesystem::remove(path);
    return ss.str();
  };
  const std::string off = trace_of(0);
  EXPECT_GT(off.size(), 100u);
  EXPECT_EQ(trace_of(model::kPrefetchAuto), off);
}

// ---- flag and summary ---------------------------------------------------------

TEST(Prefetch, FlagIsOffByDefaultAndReachesModelConfig) {
  const std::pair<std::string, int> cases[] = {{"", 0},
                                               {"--prefetch=prefill ", model::kPrefetchPrefill},
                                               {"--prefetch ", model::kPrefetchAuto},
                                               {"--prefetch=auto ", model::kPrefetchAuto},
                                               {"--prefetch=3 ", 3},
                                               {"--prefetch=off ", 0},
                                               {"--prefetch=0 ", 0}};
  for (const auto& [flags, want] : cases) {
    CLI::App app;
    runtime::EngineOptions o;
    cli::add_engine_flags(&app, o);
    app.parse(flags + "-m x.gguf", false);
    EXPECT_EQ(o.to_model_config().prefetch, want) << flags;
  }
  for (const char* bad : {"-1", "x", "3x", "", "1025", "on"}) {
    runtime::EngineOptions o;
    o.model_path = "x.gguf";
    o.prefetch = bad;
    const std::string err = test::error_of([&] { o.to_model_config(); });
    EXPECT_NE(err.find("--prefetch: expected off, prefill, auto or a number"), std::string::npos) << bad << ": " << err;
  }
}

TEST(Prefetch, DepthResolvesAgainstTheTopK) {
  EXPECT_EQ(model::resolve_prefetch_depth(0, 8), 0);
  EXPECT_EQ(model::resolve_prefetch_depth(model::kPrefetchAuto, 8), 4);
  EXPECT_EQ(model::resolve_prefetch_depth(model::kPrefetchAuto, 2), 1);
  EXPECT_EQ(model::resolve_prefetch_depth(model::kPrefetchAuto, 1), 1);
  EXPECT_EQ(model::resolve_prefetch_depth(3, 8), 3);
  EXPECT_EQ(model::resolve_prefetch_depth(20, 8), 8);
  EXPECT_EQ(model::resolve_prefetch_depth(5, 0), 0);  // dense: nothing to predict
}

TEST(Prefetch, SummaryCarriesTheCounters) {
  REQUIRE_SHARED(kStoriesQ8);
  model::ModelConfig cfg = base_config();
  cfg.prefetch = 2;
  runtime::Session s = runtime::Session::open(shared_path(kStoriesQ8), cfg);
  runtime::SamplerConfig sc;
  sc.temperature = 0;
  runtime::Sampler sampler(sc);
  s.generate(kStoriesPrompt, 6, sampler, nullptr);
  const model::PrefetchCounters p = s.model().stats().prefetch_counters;
  ASSERT_GT(p.experts, 0u);
  const telemetry::RunSummary sum = s.summary();
  const nlohmann::ordered_json j = telemetry::summary_json(sum);
  EXPECT_EQ(j["prefetch"].get<int>(), 2);
  EXPECT_EQ(j["prefetch_experts"].get<uint64_t>(), p.experts);
  EXPECT_EQ(j["prefetch_used"].get<uint64_t>(), p.used);
  EXPECT_EQ(j["prefetch_wasted"].get<uint64_t>(), p.wasted);
  EXPECT_EQ(j["prefetch_needed"].get<uint64_t>(), p.needed);
  EXPECT_EQ(j["prefetch_read_ahead"].get<uint64_t>(), p.read_ahead);
  EXPECT_EQ(p.read_ahead, p.used);  // cache off: every expert a prefetch delivered, it read
  EXPECT_DOUBLE_EQ(j["prefetch_precision_pct"].get<double>(), std::round(100.0 * p.precision() * 1e4) / 1e4);
  EXPECT_DOUBLE_EQ(j["prefetch_coverage_pct"].get<double>(), std::round(100.0 * p.coverage() * 1e4) / 1e4);
  EXPECT_DOUBLE_EQ(j["prefetch_wasted_MiB"].get<double>(),
                   std::round(1e4 * static_cast<double>(p.wasted_bytes) / 1048576.0) / 1e4);
  EXPECT_NE(telemetry::summary_human(sum).find("sluice: prefetch (depth 2): " + std::to_string(p.experts) + " experts predicted, " +
                                              std::to_string(p.used) + " used"),
            std::string::npos)
      << telemetry::summary_human(sum);
  // The existing keys keep their place; the prefetch ones come after them.
  EXPECT_EQ(std::next(j.begin(), 34).key(), "prefetch");
}

}  // namespace
}  // namespace sluice::test
