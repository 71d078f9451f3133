// Tests for synth per architecture (qwen3moe, llama dense/MoE, gpt-oss): the
// layouts against llama.cpp-made golden files, inspect on synth output, the
// gpt-oss-120b tensor table's sizing (zero-data file), exact size estimates,
// the disk-space refusal, shape-flag limits and worker failures.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <new>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "synth_test_support.h"
#include "tools/routing_probe.h"
#include "tools/synth.h"
#include "tools/synth_plan.h"
#include "util/error.h"

namespace sluice::tools {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;
using test::error_of;
using test::shared_path;

using test::sluice_cli;
using test::tensors_of;
using test::TempFile;
using test::TensorSet;

// Keys with the architecture prefix, e.g. "gpt-oss.".
std::set<std::string> arch_keys(const gguf::GgufModel& m, const std::string& prefix) {
  std::set<std::string> s;
  for (const auto& [k, v] : m.metadata().entries())
    if (k.rfind(prefix, 0) == 0) s.insert(k);
  return s;
}

// Every key of `want` (a golden file) under `prefix` is in `got` with the same
// type and value, and `got` has no other key under `prefix`.
void expect_same_arch_metadata(const gguf::GgufModel& got, const gguf::GgufModel& want, const std::string& prefix) {
  EXPECT_EQ(arch_keys(got, prefix), arch_keys(want, prefix));
  for (const auto& [k, v] : want.metadata().entries()) {
    if (k.rfind(prefix, 0) != 0) continue;
    const gguf::Value* mine = got.metadata().find(k);
    ASSERT_NE(mine, nullptr) << k;
    EXPECT_EQ(mine->type, v.type) << k;
    EXPECT_EQ(mine->u, v.u) << k;
    EXPECT_EQ(mine->s, v.s) << k;
    EXPECT_FLOAT_EQ(static_cast<float>(mine->f), static_cast<float>(v.f)) << k;
  }
}

// ---- layouts against llama.cpp's files ------------------------------------------

// The golden gpt-oss file (llama.cpp converter + llama-quantize): a synth model
// of its shape and types has exactly its tensors and gpt-oss.* keys (values
// included), and the same general.* keys except the golden's description.
TEST(SynthArch, GptOssMatchesGoldenLayoutAndMetadata) {
  if (!test::shared_has("golden/gpt-oss-mxfp4.gguf")) GTEST_SKIP() << "shared golden gpt-oss file absent";
  const auto golden = gguf::GgufModel::open(shared_path("golden/gpt-oss-mxfp4.gguf"));
  SynthConfig cfg = synth_preset("tiny", "gpt-oss");
  cfg.n_embd = 256, cfg.n_ff_exp = cfg.n_ff = 256, cfg.n_expert = 8, cfg.n_expert_used = 2;
  cfg.n_head = 8, cfg.n_head_kv = 2, cfg.head_dim = 64, cfg.n_swa = 8;
  cfg.attn_type = cfg.attn_v_type = cfg.embd_type = cfg.output_type = GgmlType::F16;  // the golden's types
  TempFile out("gpt_oss_golden.gguf");
  synth_model(cfg, out.path.string(), 2);
  const auto m = gguf::GgufModel::open(out.path.string());
  EXPECT_EQ(tensors_of(m), tensors_of(golden));
  // Same order too: llama.cpp's converter puts output/output_norm/token_embd first.
  ASSERT_EQ(m.tensors().size(), golden.tensors().size());
  for (size_t i = 0; i < m.tensors().size(); ++i) EXPECT_EQ(m.tensors()[i].name, golden.tensors()[i].name);
  expect_same_arch_metadata(m, golden, "gpt-oss.");
  std::set<std::string> ours = arch_keys(m, "general."), theirs = arch_keys(golden, "general.");
  theirs.erase("general.description");
  EXPECT_EQ(ours, theirs);
  EXPECT_EQ(m.metadata().require_uint("general.file_type"), 38u);  // MOSTLY_MXFP4_MOE
  EXPECT_EQ(m.metadata().require_string("tokenizer.ggml.pre"), "gpt-4o");
}

TEST(SynthArch, LlamaMoeAndDenseMatchGoldenLayouts) {
  for (const char* name : {"llama-moe-f32", "llama-dense-f16"}) {
    const std::string rel = std::string("golden/") + name + ".gguf";
    if (!test::shared_has(rel)) GTEST_SKIP() << "shared golden llama files absent";
    const auto golden = gguf::GgufModel::open(shared_path(rel));
    const bool moe = std::string(name) == "llama-moe-f32";
    SynthConfig cfg = synth_preset("tiny", "llama");
    cfg.n_layer = 3, cfg.n_embd = 256, cfg.n_head = 4, cfg.n_head_kv = 2, cfg.head_dim = 64;
    cfg.n_expert = moe ? 8 : 0, cfg.n_expert_used = 2, cfg.n_ff_exp = 256, cfg.n_ff = 384;
    cfg.context_length = moe ? 32768 : 4096;
    cfg.rope_theta = moe ? 1e6f : 1e4f;
    const GgmlType t = moe ? GgmlType::F32 : GgmlType::F16;
    cfg.expert_type = cfg.down_type = cfg.attn_type = cfg.attn_v_type = cfg.embd_type = cfg.output_type = t;
    TempFile out(std::string(name) + ".gguf");
    synth_model(cfg, out.path.string(), 2);
    const auto m = gguf::GgufModel::open(out.path.string());
    EXPECT_EQ(tensors_of(m), tensors_of(golden)) << name;
    expect_same_arch_metadata(m, golden, "llama.");
  }
}

// inspect on a tiny file of each architecture: the expected architecture,
// hyperparameters, tensor count and the expert/dense split.
TEST(SynthArch, InspectReportsEachArchitecture) {
  struct Case { const char* args; const char* arch; int n_tensors; int experts; };
  // 4 layers: qwen3moe 12 tensors a block + 3; llama MoE 10 + 3 (router and
  // three stacked experts), dense 9 + 3; gpt-oss 19 + 3.
  for (const Case& c : {Case{"--arch qwen3moe", "qwen3moe", 51, 16}, Case{"--arch llama", "llama", 43, 8},
                        Case{"--arch llama --experts 0", "llama", 39, 0}, Case{"--arch gpt-oss", "gpt-oss", 79, 16}}) {
    TempFile out("inspect.gguf");
    auto [rc, log] = sluice_cli("synth -q --threads 2 -o " + out.path.string() + " " + c.args);
    ASSERT_EQ(rc, 0) << c.args << "\n" << log;
    std::tie(rc, log) = sluice_cli("inspect --json " + out.path.string());
    ASSERT_EQ(rc, 0) << log;
    const auto j = nlohmann::json::parse(log);
    EXPECT_EQ(j["architecture"], c.arch) << c.args;
    EXPECT_EQ(j["block_count"], 4) << c.args;
    EXPECT_EQ(j["file"]["n_tensors"], c.n_tensors) << c.args;
    EXPECT_EQ(j["file"]["bytes"], fs::file_size(out.path)) << c.args;
    EXPECT_EQ(j["hyperparameters"]["vocab_size"], 512) << c.args;
    if (c.experts > 0) {
      EXPECT_EQ(j["expert_count"], c.experts) << c.args;
      EXPECT_GT(j["expert_bytes"].get<uint64_t>(), 0u) << c.args;
    } else {
      EXPECT_EQ(j["expert_bytes"].get<uint64_t>(), 0u) << c.args;
    }
  }
}

// A tiny llama (MoE and dense) synth model runs through the engine: finite,
// non-constant logits (the random weights are numerically sane).
// A random-weight smoke run per architecture synth writes: each tiny model
// loads and gives finite, varied logits through `sluice logits`.
TEST(SynthArch, TinyForwardPassIsFiniteForEachArchitecture) {
  for (const char* extra : {" --arch llama", " --arch llama --experts 0", " --arch qwen3moe", " --arch gpt-oss"}) {
    TempFile model("fwd.gguf"), logits("fwd.f32");
    auto [rc, log] = sluice_cli("synth -q -o " + model.path.string() + extra);
    ASSERT_EQ(rc, 0) << log;
    std::tie(rc, log) =
        sluice_cli("logits -m " + model.path.string() + " --tokens 1,17,42,300 -o " + logits.path.string());
    ASSERT_EQ(rc, 0) << extra << "\n" << log;
    std::ifstream f(logits.path, std::ios::binary);
    std::vector<float> v(4 * 512);
    f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
    ASSERT_TRUE(f) << "logits file too short";
    double sum = 0, sq = 0;
    for (float x : v) {
      ASSERT_TRUE(std::isfinite(x));
      sum += x, sq += double{x} * x;
    }
    const double mean = sum / v.size();
    EXPECT_GT(std::sqrt(sq / v.size() - mean * mean), 0.05) << extra;
  }
}

// The routing probe reads gpt-oss's pre-FFN norm (post_attention_norm) and
// router bias: synth's skew shows (busiest expert well above uniform), and
// every token makes top-k selections.
TEST(SynthArch, RoutingProbeHandlesGptOss) {
  TempFile out("probe.gguf");
  synth_model(synth_preset("tiny", "gpt-oss"), out.path.string(), 2);
  const RoutingStats st = probe_routing(gguf::GgufModel::open(out.path.string()), 0, 512);
  EXPECT_EQ(st.n_expert, 16u);
  EXPECT_EQ(st.top_k, 4u);
  EXPECT_EQ(st.n_tokens, 512u);
  uint64_t total = 0;
  for (uint64_t h : st.hits) total += h;
  EXPECT_EQ(total, 512u * 4);
  EXPECT_GT(st.top_share(), 2 * st.uniform_share());
}

// ---- the real gpt-oss-120b tensor table without 63 GB ----------------------------

// 36 layers x 3 expert matrices {2880, 2880, 128} MXFP4: one expert's matrix is
// 2880 * 2880 / 32 * 17 = 4406400 B, so top-4 token demand = 36 * 3 * 4 *
// 4406400 B = 1815.4 MiB. The per-expert biases (36 x 3 x {2880, 128} F32 =
// 159252480 B) are dense: resident, not part of the streamed demand.
TEST(SynthArch, GptOss120bTableTokenDemand) {
  TempFile out("gpt_oss_120b.gguf");
  auto [rc, log] = sluice_cli("synth -q --preset gpt-oss-120b --zero-data -o " + out.path.string());
  ASSERT_EQ(rc, 0) << log;
  const SynthSizes sizes = synth_sizes(synth_preset("gpt-oss-120b"), 1);
  EXPECT_EQ(fs::file_size(out.path), sizes.file_bytes);
  EXPECT_GT(sizes.file_bytes, 63'000'000'000u);
  struct stat st {};
  ASSERT_EQ(::stat(out.path.c_str(), &st), 0);
  EXPECT_LT(uint64_t(st.st_blocks) * 512, 64u << 20) << "the tensor data should be a hole";

  std::tie(rc, log) = sluice_cli("inspect --json " + out.path.string());
  ASSERT_EQ(rc, 0) << log.substr(0, 2000);
  const auto j = nlohmann::json::parse(log);
  EXPECT_EQ(j["architecture"], "gpt-oss");
  EXPECT_EQ(j["block_count"], 36);
  EXPECT_EQ(j["expert_count"], 128);
  EXPECT_EQ(j["expert_used_count"], 4);
  EXPECT_EQ(j["hyperparameters"]["vocab_size"], 201088);
  EXPECT_EQ(j["metadata"]["gpt-oss.attention.sliding_window"], 128);
  EXPECT_EQ(j["sizing"]["top_k"], 4);
  EXPECT_EQ(j["sizing"]["token_demand_bytes"].get<uint64_t>(), 36ull * 3 * 4 * 4406400);
  EXPECT_NEAR(j["sizing"]["token_demand_bytes"].get<double>() / 1048576.0, 1815.4, 0.5);
  EXPECT_EQ(j["expert_bytes"].get<uint64_t>(), 36ull * 3 * 128 * 4406400);

  uint64_t exps_bias = 0, not_expert_weights = 0;
  for (const auto& t : j["tensors"]) {
    const std::string name = t["name"];
    const uint64_t bytes = t["bytes"];
    const bool expert_weight = name.size() > 12 && name.compare(name.size() - 12, 12, "_exps.weight") == 0;
    if (!expert_weight) not_expert_weights += bytes;
    if (name.find("_exps.bias") != std::string::npos) {
      EXPECT_EQ(t["type"], "F32") << name;
      exps_bias += bytes;
    }
  }
  EXPECT_EQ(exps_bias, 36ull * 3 * 2880 * 128 * 4);
  EXPECT_EQ(j["dense_bytes"].get<uint64_t>(), not_expert_weights);  // biases counted as dense
}

// ---- sizes, disk space, limits, worker failures ------------------------------------

TEST(SynthArch, SizeEstimateIsExact) {
  for (const char* arch : {"qwen3moe", "llama", "gpt-oss"}) {
    const SynthConfig cfg = synth_preset("tiny", arch);
    TempFile out("size.gguf");
    const SynthResult r = synth_model(cfg, out.path.string(), 3);
    const SynthSizes s = synth_sizes(cfg, 3);
    EXPECT_EQ(s.file_bytes, r.bytes) << arch;
    EXPECT_EQ(s.file_bytes, fs::file_size(out.path)) << arch;
    EXPECT_EQ(s.buffer_bytes, r.buffer_bytes) << arch;
    // Linear in the layer count up to the header's padding.
    SynthConfig more = cfg;
    more.n_layer += 3;
    const SynthSizes s2 = synth_sizes(more, 3);
    EXPECT_LE(s2.file_bytes, s.file_bytes + 3 * s.per_layer_bytes + 32) << arch;
    EXPECT_GE(s2.file_bytes + 32, s.file_bytes + 3 * s.per_layer_bytes) << arch;
  }
}

TEST(SynthArch, DiskSpaceCheckNamesBothSizesAndAFittingLayerCount) {
  EXPECT_EQ(error_of([] { check_disk_space("f.gguf", 500, 500, 100, 10); }), "(no error)");
  const std::string e = error_of([] { check_disk_space("f.gguf", 501, 155, 100, 10); });
  EXPECT_NE(e.find("f.gguf"), std::string::npos) << e;
  EXPECT_NE(e.find("(501 bytes)"), std::string::npos) << e;
  EXPECT_NE(e.find("(155 bytes)"), std::string::npos) << e;
  EXPECT_NE(e.find("--layers 5 would fit"), std::string::npos) << e;
  // Not even one layer fits: no --layers advice.
  const std::string e2 = error_of([] { check_disk_space("f.gguf", 501, 105, 100, 10); });
  EXPECT_EQ(e2.find("--layers"), std::string::npos) << e2;
  EXPECT_NE(e2.find("(105 bytes)"), std::string::npos) << e2;
}

// A model far larger than any disk is refused before anything is written.
TEST(SynthArch, CliRefusesAFileBiggerThanFreeSpace) {
  TempFile out("huge.gguf");
  auto [rc, log] = sluice_cli("synth -q -o " + out.path.string() +
                              " --layers 1024 --experts 4096 --n-embd 65536 --n-ff-exp 262144 --type F32");
  EXPECT_EQ(rc, 1) << log;
  EXPECT_NE(log.find("free"), std::string::npos) << log;
  EXPECT_NE(log.find(out.path.string()), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(out.path));
}

TEST(SynthArch, ShapeFlagsAreRangeCheckedBeforeAllocating) {
  struct Case { const char* args; const char* flag; const char* limit; };
  for (const Case& c : {Case{"--n-embd 1000000000", "--n-embd", "1..65536"},
                        Case{"--layers 0", "--layers", "1..1024"},
                        Case{"--experts 100000", "--experts", "0..4096"},
                        Case{"--n-ff-exp 1000000000", "--n-ff-exp", "1..262144"},
                        Case{"--head-dim 4096", "--head-dim", "2..1024"},
                        Case{"--kv-heads 8", "--kv-heads", "1..4"},
                        Case{"--preset gpt-oss-20b --layers 25", "--layers", "1..24"},
                        Case{"--preset gpt-oss-20b --arch llama", "--arch", "gpt-oss"}}) {
    TempFile out("limits.gguf");
    auto [rc, log] = sluice_cli("synth -q -o " + out.path.string() + " " + c.args);
    EXPECT_EQ(rc, 1) << c.args << "\n" << log;  // an Error, not a crash (SIGABRT would be -1)
    EXPECT_NE(log.find(c.flag), std::string::npos) << c.args << "\n" << log;
    EXPECT_NE(log.find(c.limit), std::string::npos) << c.args << "\n" << log;
    EXPECT_FALSE(fs::exists(out.path)) << c.args;
  }
}

// A worker that throws (here std::bad_alloc, as an allocation failure would)
// stops the pipeline and reaches the caller as one sluice::Error; a failing
// consumer likewise; a normal run hands every chunk over in order.
TEST(SynthArch, PipelineRethrowsWorkerFailuresAsOneError) {
  std::vector<size_t> seen;
  run_chunk_pipeline(
      50, 4, 8, [](size_t i, std::vector<uint8_t>& b) { b.assign(3, static_cast<uint8_t>(i)); },
      [&](size_t i, std::vector<uint8_t>& b) {
        EXPECT_EQ(b, std::vector<uint8_t>(3, static_cast<uint8_t>(i)));
        seen.push_back(i);
      });
  ASSERT_EQ(seen.size(), 50u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i);

  const std::string e = error_of([] {
    run_chunk_pipeline(
        100, 3, 6,
        [](size_t i, std::vector<uint8_t>& b) {
          if (i == 7) throw std::bad_alloc();
          b.assign(1, 0);
        },
        [](size_t, std::vector<uint8_t>&) {});
  });
  EXPECT_NE(e.find("out of memory"), std::string::npos) << e;

  const std::string e2 = error_of([] {
    run_chunk_pipeline(
        100, 3, 6, [](size_t, std::vector<uint8_t>& b) { b.assign(1, 0); },
        [](size_t i, std::vector<uint8_t>&) {
          if (i == 20) throw Error("out.gguf: disk full");
        });
  });
  EXPECT_EQ(e2, "out.gguf: disk full");
}

}  // namespace
}  // namespace sluice::tools
