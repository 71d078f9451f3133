// Telemetry: per-eval records and the run summary (telemetry/telemetry.h).
//
// The stories-moe-8x Q8_0 model (shared/models/README.md): 5 layers, all MoE,
// 8 experts, top-2, experts {64,192} gate/up and {192,64} down in Q8_0.
// One Q8_0 block is 32 weights in 34 bytes, so one expert matrix is
// 64*192/32*34 = 13056 bytes and one expert (gate+up+down) 39168 bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model_test_support.h"
#include "runtime/session.h"
#include "telemetry/telemetry.h"
#include "util/error.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

using telemetry::EvalKind;
using telemetry::TokenRecord;

constexpr uint64_t kExpertBytesQ8 = 3 * (64 * 192 / 32 * 34);
constexpr int kLayers = 5;
constexpr int kTopK = 2;
constexpr int kExperts = 8;
const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378};  // "Once upon a time" with BOS

const char* const kSummaryKeys[] = {
    "prefill_tokens", "prefill_s",       "prefill_tps",     "decode_tokens",  "decode_s",
    "decode_tps",     "ttft_ms",         "token_demand_MiB", "layer_demand_MiB", "cache_budget_MiB",
    "cache_hit_pct",  "experts_routed",  "experts_hit",     "experts_read",   "experts_dropped",
    "dropped_top_p",  "dropped_budget",  "dropped_cold",    "io_saved_GB",    "expert_budget",
    "bytes_read",     "reads",           "read_GBps",       "io_lane_s",      "majflt",
    "majflt_per_tok", "dense_resident_frac", "dense_MiB",   "peak_rss_MiB",   "eval_s",
    "expert_io_s",    "expert_matmul_s", "attention_s",     "other_s",
    // --prefetch (zero / false when off)
    "prefetch",       "prefetch_experts", "prefetch_used",  "prefetch_wasted", "prefetch_needed",
    "prefetch_failed", "prefetch_read_ahead", "prefetch_precision_pct", "prefetch_coverage_pct", "prefetch_wasted_MiB", "prefetch_wasted_MiB_per_tok",
    // the decode phase per emitted token, and --mtp (zero / empty when off)
    "decode_MiB_per_tok", "decode_experts_read_per_tok", "decode_tokens_per_forward", "mtp", "ngram", "mtp_steps",
    "mtp_drafted", "mtp_accepted", "mtp_accept_pct", "mtp_accept_pct_by_pos", "mtp_plain_steps", "mtp_switches", "route_replay",
    // --resident-layout
    "resident_layout", "dense_packed_MiB", "experts_packed", "experts_transformed",
    // rollbacks that fell back to a checkpoint (model/state)
    "recomputed_tokens"};

std::string q8_path() { return shared_path("models/stories-moe-8x-q8_0.gguf"); }

// Buffered reads read exactly each expert's bytes (O_DIRECT would read
// aligned covers), which makes bytes_read exact.
runtime::Session open_session(const std::string& path, bool load_all = false) {
  auto cfg = golden_config();
  cfg.odirect = false;
  cfg.load_all = load_all;
  return runtime::Session::open(path, cfg);
}

// Greedy generation of n tokens after kPrompt.
void generate(runtime::Session& s, int n) {
  runtime::SamplerConfig sc;
  sc.temperature = 0;
  runtime::Sampler sampler(sc);
  s.generate(kPrompt, n, sampler, nullptr);
}

void expect_balanced(const model::ExpertCounters& c, const std::string& where) {
  EXPECT_EQ(c.routed, c.hit + c.read + c.dropped) << where;
  EXPECT_EQ(c.dropped, c.dropped_top_p + c.dropped_budget + c.dropped_cold) << where;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The one line starting with `prefix`; fails the test when there is not exactly one.
std::string line_with_prefix(const std::string& text, const std::string& prefix) {
  std::string found;
  int n = 0;
  for (const std::string& l : lines_of(text))
    if (l.rfind(prefix, 0) == 0) {
      found = l;
      ++n;
    }
  EXPECT_EQ(n, 1) << "lines starting with '" << prefix << "' in:\n" << text;
  return found;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sluice_telemetry_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

TEST(Telemetry, DecodeRecordsCountEveryRoutedExpertAsARead) {
  if (!exists(q8_path())) GTEST_SKIP() << q8_path() << " not found";
  runtime::Session s = open_session(q8_path());
  for (int l = 0; l < kLayers; ++l) ASSERT_EQ(s.model().expert_bytes(l), kExpertBytesQ8) << "layer " << l;
  generate(s, 12);

  const auto& recs = s.telemetry().records();
  // Prompt as one record, then 11 decode evals (the 12th token stays pending).
  ASSERT_EQ(recs.size(), 12u);
  EXPECT_EQ(recs[0].kind, EvalKind::Prefill);
  EXPECT_EQ(recs[0].n_tokens, 5);
  EXPECT_EQ(recs[0].pos, 0);
  // 5 tokens pick between 2 and 8 distinct experts per layer.
  EXPECT_GE(recs[0].experts.routed, uint64_t{kLayers * kTopK});
  EXPECT_LE(recs[0].experts.routed, uint64_t{kLayers * kExperts});
  for (const TokenRecord& r : recs) {
    const std::string where = "record " + std::to_string(r.index);
    expect_balanced(r.experts, where);
    EXPECT_EQ(r.experts.hit, 0u) << where;  // no cache, no --load-all
    EXPECT_EQ(r.experts.dropped, 0u) << where;
    EXPECT_EQ(r.bytes_read, r.experts.read * kExpertBytesQ8) << where;
    EXPECT_EQ(r.experts.dropped_bytes, 0u) << where;
    EXPECT_GE(r.ms, 0.0);
    EXPECT_GE(r.stall_ms, 0.0);
    EXPECT_LE(r.stall_ms, r.ms + 1e-6) << where;
    EXPECT_DOUBLE_EQ(r.compute_ms, r.ms - r.stall_ms) << where;
    EXPECT_EQ(r.dense_res, 1.0) << where;  // anon dense weights are in RAM
  }
  for (size_t i = 1; i < recs.size(); ++i) {
    const std::string where = "decode record " + std::to_string(i);
    EXPECT_EQ(recs[i].kind, EvalKind::Decode) << where;
    EXPECT_EQ(recs[i].n_tokens, 1) << where;
    EXPECT_EQ(recs[i].pos, static_cast<int>(4 + i)) << where;
    EXPECT_EQ(recs[i].experts.routed, uint64_t{kLayers * kTopK}) << where;
    EXPECT_EQ(recs[i].experts.read, uint64_t{kLayers * kTopK}) << where;
  }
  EXPECT_TRUE(recs[0].dense_res_sampled);  // sampled on record 0 and every 16th
  EXPECT_FALSE(recs[1].dense_res_sampled);

  // Records add up to the store's own totals.
  const model::ModelStats st = s.model().stats();
  uint64_t read = 0, routed = 0, bytes = 0;
  for (const TokenRecord& r : recs) {
    read += r.experts.read;
    routed += r.experts.routed;
    bytes += r.bytes_read;
  }
  EXPECT_EQ(read, st.io.experts_read);
  EXPECT_EQ(routed, st.experts.routed);
  EXPECT_EQ(bytes, st.io.bytes_read);
  EXPECT_EQ(st.io.bytes_read, st.io.experts_read * kExpertBytesQ8);
  expect_balanced(st.experts, "model totals");
  EXPECT_GE(st.time.eval_s, st.time.expert_io_s + st.time.expert_matmul_s + st.time.attention_s - 1e-9);
}

TEST(Telemetry, LoadAllServesEveryExpertWithoutARead) {
  if (!exists(q8_path())) GTEST_SKIP() << q8_path() << " not found";
  runtime::Session s = open_session(q8_path(), /*load_all=*/true);
  const uint64_t read_at_load = s.model().stats().io.experts_read;
  generate(s, 4);
  for (const TokenRecord& r : s.telemetry().records()) {
    expect_balanced(r.experts, "record " + std::to_string(r.index));
    EXPECT_EQ(r.experts.read, 0u);
    EXPECT_EQ(r.experts.hit, r.experts.routed);
    EXPECT_EQ(r.bytes_read, 0u);
  }
  EXPECT_EQ(s.model().stats().io.experts_read, read_at_load);
  const telemetry::RunSummary sum = s.summary();
  EXPECT_DOUBLE_EQ(sum.cache_hit_pct(), 100.0);
  EXPECT_EQ(sum.bytes_read, 0u);  // the load's reads are not the run's
  EXPECT_EQ(sum.reads, 0u);
  EXPECT_GT(s.model().stats().io.bytes_read, 0u);
}

TEST(Telemetry, SummaryOfAStoriesRun) {
  if (!exists(q8_path())) GTEST_SKIP() << q8_path() << " not found";
  runtime::Session s = open_session(q8_path());
  generate(s, 8);
  const telemetry::RunSummary sum = s.summary();
  EXPECT_EQ(sum.prefill_tokens, 5);
  EXPECT_EQ(sum.decode_tokens, 7);
  EXPECT_EQ(sum.token_demand_bytes, uint64_t{kLayers * kTopK} * kExpertBytesQ8);
  EXPECT_EQ(sum.layer_demand_bytes, uint64_t{kTopK} * kExpertBytesQ8);
  EXPECT_EQ(sum.experts.routed, sum.experts.read);
  EXPECT_EQ(sum.bytes_read, sum.experts.read * kExpertBytesQ8);
  EXPECT_EQ(sum.cache_hit_pct(), 0.0);
  EXPECT_GT(sum.ttft_ms, 0.0);
  EXPECT_GT(sum.peak_rss_mib, 0.0);
  EXPECT_EQ(sum.dense_resident_frac, 1.0);

  const nlohmann::ordered_json j = telemetry::summary_json(sum);
  for (const char* key : kSummaryKeys) EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j.size(), std::size(kSummaryKeys));
  EXPECT_EQ(j["experts_read"].get<uint64_t>(), sum.experts.read);
  EXPECT_EQ(j["bytes_read"].get<uint64_t>(), sum.bytes_read);
  EXPECT_DOUBLE_EQ(j["token_demand_MiB"].get<double>(), std::round(10.0 * 39168 / 1048576 * 1e4) / 1e4);

  EXPECT_EQ(telemetry::expert_budget_line(sum), "");  // no budget set
}

TEST(Telemetry, DenseModelRoutesNothing) {
  const std::string path = shared_path("models/stories260k-f32.gguf");
  if (!exists(path)) GTEST_SKIP() << path << " not found";
  runtime::Session s = open_session(path);
  generate(s, 3);
  for (const TokenRecord& r : s.telemetry().records()) {
    EXPECT_EQ(r.experts.routed, 0u);
    EXPECT_EQ(r.bytes_read, 0u);
  }
  const telemetry::RunSummary sum = s.summary();
  EXPECT_EQ(sum.token_demand_bytes, 0u);
  EXPECT_EQ(sum.layer_demand_bytes, 0u);
}

TEST(Telemetry, EvalAllIsOnePrefillRecordAndRefusesAPendingToken) {
  if (!exists(q8_path())) GTEST_SKIP() << q8_path() << " not found";
  runtime::Session s = open_session(q8_path());
  std::vector<float> logits(kPrompt.size() * static_cast<size_t>(s.n_vocab()));
  s.eval_all(kPrompt, logits.data());
  ASSERT_EQ(s.telemetry().records().size(), 1u);
  EXPECT_EQ(s.telemetry().records()[0].kind, EvalKind::Prefill);
  EXPECT_EQ(s.telemetry().records()[0].n_tokens, 5);
  EXPECT_EQ(s.tokens().size(), kPrompt.size());

  s.reset();
  generate(s, 2);  // leaves its last token pending
  EXPECT_THROW(s.eval_all(kPrompt, logits.data()), Error);
}

TEST(Telemetry, ExpertBudgetLineAndDerivedFigures) {
  telemetry::RunSummary s;
  s.expert_budget = 6;
  s.experts.routed = 100;
  s.experts.read = 40;
  s.experts.hit = 10;
  s.experts.dropped = 50;
  s.experts.dropped_budget = 1234;
  s.experts.dropped_bytes = 2'500'000'000;
  EXPECT_EQ(telemetry::expert_budget_line(s), "EXPERT_BUDGET=6 (dropped 1234 experts, ~2.50 GB I/O saved)");
  EXPECT_DOUBLE_EQ(s.cache_hit_pct(), 20.0);
  EXPECT_DOUBLE_EQ(s.io_saved_gb(), 2.5);
  s.prefill_tokens = 4;
  s.decode_tokens = 6;
  s.majflt = 25;
  EXPECT_DOUBLE_EQ(s.majflt_per_tok(), 2.5);
  s.bytes_read = 3'000'000'000;
  s.time.eval_s = 2.0;
  EXPECT_DOUBLE_EQ(s.read_gbps(), 1.5);
  s.expert_budget = 0;
  EXPECT_EQ(telemetry::expert_budget_line(s), "");
}

TEST(Telemetry, SummarizeSplitsPrefillAndDecode) {
  std::vector<TokenRecord> recs(3);
  recs[0].kind = EvalKind::Prefill;
  recs[0].n_tokens = 10;
  recs[0].ms = 500;
  recs[0].majflt = 3;
  recs[1].n_tokens = 1;
  recs[1].ms = 250;
  recs[2].n_tokens = 1;
  recs[2].ms = 250;
  recs[2].majflt = 1;
  recs[0].experts.routed = 7;
  recs[0].experts.read = 7;
  recs[0].bytes_read = 700;
  recs[0].reads = 21;
  recs[1].experts.routed = 2;
  recs[1].experts.hit = 2;
  recs[2].experts.routed = 2;
  recs[2].experts.read = 1;
  recs[2].experts.dropped = 1;
  recs[2].experts.dropped_cold = 1;
  recs[2].bytes_read = 100;
  recs[2].reads = 3;
  recs[2].io_ms = 1500;
  telemetry::SummaryInput in;
  in.records = recs;
  in.opts.cache_budget_bytes = 64ull << 20;
  const telemetry::RunSummary s = telemetry::summarize(in);
  EXPECT_EQ(s.prefill_tokens, 10);
  EXPECT_DOUBLE_EQ(s.prefill_tps(), 20.0);
  EXPECT_EQ(s.decode_tokens, 2);
  EXPECT_DOUBLE_EQ(s.decode_tps(), 4.0);
  EXPECT_DOUBLE_EQ(s.ttft_ms, 500.0);  // no ttft given: the first record's time
  EXPECT_EQ(s.majflt, 4u);
  EXPECT_EQ(s.experts.routed, 11u);
  EXPECT_EQ(s.experts.hit, 2u);
  EXPECT_EQ(s.experts.read, 8u);
  EXPECT_EQ(s.experts.dropped, 1u);
  EXPECT_EQ(s.experts.dropped_cold, 1u);
  EXPECT_EQ(s.bytes_read, 800u);
  EXPECT_EQ(s.reads, 24u);
  EXPECT_DOUBLE_EQ(s.io_lane_s, 1.5);
  EXPECT_EQ(telemetry::summary_json(s)["cache_budget_MiB"].get<double>(), 64.0);
}

TEST(Telemetry, ProgressLineAndCsvRowFormat) {
  TokenRecord r;
  r.index = 12;
  r.n_tokens = 1;
  r.pos = 16;
  r.ms = 45.1;
  r.io_ms = 30.2;
  r.stall_ms = 28.0;
  r.compute_ms = 17.1;
  r.experts.routed = 384;
  r.experts.read = 384;
  r.bytes_read = 972ull << 20;
  r.reads = 1152;
  r.dense_res = 1.0;
  EXPECT_EQ(telemetry::progress_line(r),
            "tok 12 n 1 ms 45.1 io 30.2 compute 17.1 stall 28.0 routed 384 hit 0 read 384 dropped 0 MiB 972.0 "
            "majflt 0 dense_res 1.00");
  EXPECT_EQ(telemetry::csv_row(r), "12,decode,1,16,45.100,30.200,17.100,28.000,384,0,384,0,1019215872,1152,972.000,0,1.0000");
}

TEST(Telemetry, CsvWriterNamesAnUnwritablePath) {
  try {
    telemetry::CsvWriter w("/nonexistent-dir/x.csv");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.csv"), std::string::npos) << e.what();
  }
}

// ---- through the sluice binary ----

TEST(TelemetryCli, RunPrintsProgressCsvAndSummaryOnStderr) {
  if (!exists(q8_path())) GTEST_SKIP() << q8_path() << " not found";
  TempDir dir;
  const std::string out = dir.file("out.txt"), err = dir.file("err.txt"), csv = dir.file("t.csv"),
                    json = dir.file("r.json");
  const std::string cmd = std::string(SLUICE_BINARY) + " run -m " + q8_path() +
                          " -p 'Once upon a time' -n 8 --temp 0 --no-odirect --progress --csv " + csv + " --json " +
                          json + " >" + out + " 2>" + err;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << slurp(err);
  const std::string stdout_text = slurp(out), stderr_text = slurp(err);
  EXPECT_EQ(stdout_text.find("decode_tokens"), std::string::npos) << "stdout is the generated text only";
  EXPECT_EQ(stdout_text.rfind("Once upon a time", 0), 0u) << stdout_text;
  // Machine output only where asked: the --json file, not stderr.
  EXPECT_EQ(stderr_text.find("SLUICE_DONE"), std::string::npos) << stderr_text;
  EXPECT_EQ(stderr_text.find("# summary"), std::string::npos) << stderr_text;

  const nlohmann::json doc = nlohmann::json::parse(slurp(json));
  // The text in the object is what stdout got after the echoed prompt.
  EXPECT_EQ("Once upon a time" + doc["text"].get<std::string>() + "\n", stdout_text);
  EXPECT_EQ(doc["finish_reason"], "length");
  const nlohmann::json& j = doc["summary"];
  for (const char* key : kSummaryKeys) EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["prefill_tokens"].get<int>(), 5);
  EXPECT_EQ(j["decode_tokens"].get<int>(), 7);
  EXPECT_EQ(j["bytes_read"].get<uint64_t>(), j["experts_read"].get<uint64_t>() * kExpertBytesQ8);
  EXPECT_EQ(j["experts_routed"].get<uint64_t>(),
            j["experts_hit"].get<uint64_t>() + j["experts_read"].get<uint64_t>() +
                j["experts_dropped"].get<uint64_t>());
  EXPECT_EQ(stderr_text.find("EXPERT_BUDGET"), std::string::npos);

  // One progress line and one CSV row per eval: the prompt plus 7 decode steps.
  int progress = 0;
  for (const std::string& l : lines_of(stderr_text))
    if (l.rfind("tok ", 0) == 0) {
      ++progress;
      EXPECT_NE(l.find(progress == 1 ? " n 5 " : " n 1 "), std::string::npos) << l;
    }
  EXPECT_EQ(progress, 8);
  const std::vector<std::string> rows = lines_of(slurp(csv));
  ASSERT_EQ(rows.size(), 9u);
  EXPECT_EQ(rows[0], telemetry::csv_header());
  EXPECT_EQ(rows[1].rfind("0,prefill,5,0,", 0), 0u) << rows[1];
  for (size_t i = 2; i < rows.size(); ++i)
    EXPECT_EQ(rows[i].rfind(std::to_string(i - 1) + ",decode,1,", 0), 0u) << rows[i];
}

TEST(TelemetryCli, LogitsPrintsTheSummaryToo) {
  if (!exists(q8_path())) GTEST_SKIP() << q8_path() << " not found";
  TempDir dir;
  const std::string err = dir.file("err.txt");
  const std::string cmd = std::string(SLUICE_BINARY) + " logits -m " + q8_path() + " --tokens 1,403,407 -o " +
                          dir.file("l.f32") + " --json - 2>" + err;
  int rc = -1;
  const std::string out = run_cmd(cmd, &rc);
  ASSERT_EQ(rc, 0) << cmd << "\n" << slurp(err);
  const nlohmann::json j = nlohmann::json::parse(out)["summary"];
  EXPECT_EQ(j["prefill_tokens"].get<int>(), 3);
  EXPECT_EQ(j["decode_tokens"].get<int>(), 0);
  // Default stderr: one summary line (after the "wrote" notice).
  line_with_prefix(slurp(err), "sluice: prompt 3 tokens at ");
}

}  // namespace
}  // namespace sluice::test
