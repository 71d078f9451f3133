// Tests for `sluice repack` (tools/repack.*) and the expert layouts it relies
// on (gguf/expert_layout.*): the expert-major file is a valid GGUF whose
// experts are one 4 KiB-aligned extent each, holds the same bytes, gives
// bit-identical logits under every I/O configuration, is read with one
// request per expert, and reports the same `inspect` figures.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <string>
#include <vector>

#include "gguf/expert_layout.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model/model.h"
#include "test_support.h"
#include "tools/model_info.h"
#include "tools/repack.h"
#include "tools/synth.h"
#include "util/error.h"

namespace sluice {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint64_t kPage = 4096;

// A scratch directory removed with everything in it.
using test::TempDir;

// The synthesized tiny model and its repacked copy, made once for the suite.
class RepackTiny : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    tools::synth_model(tools::synth_preset("tiny"), original(), 2);
    tools::repack_expert_major(original(), repacked());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string original() { return dir_->file("tiny.gguf"); }
  static std::string repacked() { return dir_->file("tiny.expert-major.gguf"); }
  static TempDir* dir_;
};
TempDir* RepackTiny::dir_ = nullptr;

std::vector<int32_t> test_tokens(uint32_t n_vocab) {
  std::vector<int32_t> t;
  for (uint32_t i = 0; i < 12; ++i) t.push_back(static_cast<int32_t>((i * 7919u + 3u) % n_vocab));
  return t;
}

struct RunResult {
  std::vector<float> logits;
  moe::ExpertIoStats io;
};

// (model_test_support.h and test_support.h both define shared_path, so this
// file uses test_support.h and loads models itself.)
RunResult run_model(const std::string& path, const model::ModelConfig& cfg) {
  auto m = model::load_model(std::make_shared<const gguf::GgufModel>(gguf::GgufModel::open(path)), cfg);
  const uint32_t n_vocab = m->hparams().n_vocab;
  const std::vector<int32_t> prompt = test_tokens(n_vocab);
  RunResult r;
  r.logits.resize(prompt.size() * n_vocab);
  m->eval(prompt, 0, r.logits.data());
  // Decode two more tokens one at a time (the single-token path).
  std::vector<float> one(n_vocab);
  for (int32_t i = 0; i < 2; ++i) {
    const int32_t next[1] = {static_cast<int32_t>((5 + 6 * i) % n_vocab)};
    m->eval_last(next, static_cast<int>(prompt.size()) + i, one.data());
    r.logits.insert(r.logits.end(), one.begin(), one.end());
  }
  r.io = m->stats().io;
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The I/O configurations that must not change a single bit of the logits.
std::vector<std::pair<std::string, model::ModelConfig>> io_configs() {
  std::vector<std::pair<std::string, model::ModelConfig>> out;
  model::ModelConfig base;
  base.kv_type = model::KvType::F32;
  base.n_ctx = 64;
  base.threads = 1;
  base.io_threads = 1;
  base.odirect = true;
  out.push_back({"cache off, O_DIRECT, io 1, -t 1", base});
  model::ModelConfig c = base;
  c.io_threads = 4;
  c.threads = 2;
  out.push_back({"cache off, io 4, -t 2", c});
  c = base;
  c.odirect = false;
  c.dense_mode = moe::DenseMode::Mmap;
  out.push_back({"--no-odirect, mmap dense", c});
  c = base;
  c.cache_bytes = uint64_t{64} << 20;
  c.io_threads = 4;
  out.push_back({"cache 64 MiB, io 4", c});
  c = base;
  c.load_all = true;
  c.threads = 2;
  out.push_back({"--load-all, -t 2", c});
  return out;
}

// ---- layout of the repacked file ---------------------------------------------

TEST_F(RepackTiny, OutputIsExpertMajorWithAlignedOneExtentExperts) {
  const auto in = gguf::GgufModel::open(original());
  const auto out = gguf::GgufModel::open(repacked());
  EXPECT_EQ(gguf::expert_layout(in), gguf::ExpertLayout::Stacked);
  ASSERT_EQ(gguf::expert_layout(out), gguf::ExpertLayout::ExpertMajor);
  EXPECT_EQ(out.split(0).alignment, kPage);
  EXPECT_EQ(out.metadata().get_uint("general.alignment"), kPage);
  EXPECT_EQ(out.metadata().get_string(gguf::kExpertLayoutKey), "expert-major");
  EXPECT_EQ(out.metadata().get_uint(gguf::kExpertLayoutAlignmentKey), kPage);

  const auto a = gguf::layer_expert_parts(in);
  const auto b = gguf::layer_expert_parts(out);
  ASSERT_EQ(a.size(), b.size());
  int layers = 0;
  for (size_t l = 0; l < a.size(); ++l) {
    ASSERT_EQ(a[l].present(), b[l].present());
    if (!a[l].present()) continue;
    ++layers;
    ASSERT_EQ(a[l].n_expert(), b[l].n_expert());
    for (size_t p = 0; p < 3; ++p) {
      EXPECT_EQ(a[l].part[p].type, b[l].part[p].type);
      EXPECT_EQ(a[l].part[p].ne, b[l].part[p].ne);
      EXPECT_EQ(a[l].part[p].bytes, b[l].part[p].bytes);
    }
    for (uint64_t e = 0; e < b[l].n_expert(); ++e) {
      const auto& r = b[l].experts[e];
      const std::string what = "layer " + std::to_string(l) + " expert " + std::to_string(e);
      EXPECT_EQ(r[0].offset % kPage, 0u) << what;
      for (size_t p = 1; p < 3; ++p) {
        const uint64_t prev_end = r[p - 1].offset + r[p - 1].bytes;
        EXPECT_EQ(r[p].offset % kPage, 0u) << what;
        ASSERT_GE(r[p].offset, prev_end) << what;
        EXPECT_LT(r[p].offset - prev_end, kPage) << what << ": gap before part " << p;
      }
      // Same bytes as the stacked slice of the original.
      for (size_t p = 0; p < 3; ++p) {
        std::vector<uint8_t> x(a[l].experts[e][p].bytes), y(r[p].bytes);
        io::open_file(in.paths()[0])->read_exact(x.data(), x.size(), a[l].experts[e][p].offset);
        io::open_file(out.paths()[0])->read_exact(y.data(), y.size(), r[p].offset);
        ASSERT_EQ(x, y) << what << " part " << p;
      }
    }
  }
  EXPECT_GT(layers, 0);
}

TEST_F(RepackTiny, MetadataAndDenseTensorsAreUnchanged) {
  const auto in = gguf::GgufModel::open(original());
  const auto out = gguf::GgufModel::open(repacked());
  // Metadata: the input's entries in order (general.alignment's value aside),
  // then the two layout keys.
  std::vector<std::pair<std::string, gguf::Value>> want;
  for (const auto& kv : in.metadata().entries()) want.push_back(kv);
  const auto& got = out.metadata().entries();
  size_t i = 0;
  for (const auto& [key, value] : got) {
    if (key == "general.alignment" && !in.metadata().has("general.alignment")) continue;  // the writer adds it
    if (key == gguf::kExpertLayoutKey || key == gguf::kExpertLayoutAlignmentKey) continue;
    ASSERT_LT(i, want.size()) << key;
    EXPECT_EQ(key, want[i].first);
    if (key != "general.alignment") {
      EXPECT_EQ(value.type, want[i].second.type) << key;
      EXPECT_EQ(value.s, want[i].second.s) << key;
      EXPECT_EQ(value.u, want[i].second.u) << key;
      EXPECT_EQ(value.array.size(), want[i].second.array.size()) << key;
    }
    ++i;
  }
  EXPECT_EQ(i, want.size());
  EXPECT_EQ(out.metadata().get_string_array("tokenizer.ggml.tokens"),
            in.metadata().get_string_array("tokenizer.ggml.tokens"));

  size_t dense = 0;
  for (const gguf::TensorInfo& t : in.tensors()) {
    if (gguf::is_expert_weight(t)) {
      EXPECT_EQ(out.find(t.name), nullptr) << t.name << " should be replaced by per-expert tensors";
      continue;
    }
    const gguf::TensorInfo* u = out.find(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->type, t.type);
    EXPECT_EQ(u->ne, t.ne);
    EXPECT_EQ(u->offset % kPage, 0u);
    EXPECT_EQ(test::read_tensor_bytes(out, *u), test::read_tensor_bytes(in, t)) << t.name;
    ++dense;
  }
  EXPECT_GT(dense, 0u);
}

// ---- the engine on both layouts -----------------------------------------------

TEST_F(RepackTiny, LogitsAreBitIdenticalInEveryIoConfiguration) {
  const RunResult ref = run_model(original(), io_configs()[0].second);
  for (const auto& [name, cfg] : io_configs()) {
    const RunResult a = run_model(original(), cfg);
    const RunResult b = run_model(repacked(), cfg);
    EXPECT_TRUE(same_bits(a.logits, ref.logits)) << name << ": original differs from the reference run";
    EXPECT_TRUE(same_bits(b.logits, ref.logits)) << name << ": repacked differs from the original";
  }
}

TEST_F(RepackTiny, OneReadPerExpertInsteadOfThree) {
  model::ModelConfig cfg = io_configs()[0].second;  // cache off: every routed expert is read
  const RunResult a = run_model(original(), cfg);
  const RunResult b = run_model(repacked(), cfg);
  ASSERT_GT(b.io.experts_read, 0u);
  EXPECT_EQ(a.io.experts_read, b.io.experts_read);
  // tiny experts are ~27 KiB, far below the store's 1 MiB read chunk.
  EXPECT_EQ(b.io.reads, b.io.experts_read);
  // Stacked: gate, up and down of an expert are three separate extents.
  EXPECT_EQ(a.io.reads, 3 * a.io.experts_read);
}

TEST_F(RepackTiny, ExpertStoreLoadAllServesTheSameBytesForBothLayouts) {
  const auto in = gguf::GgufModel::open(original());
  const auto out = gguf::GgufModel::open(repacked());
  moe::ExpertStoreConfig sc;
  sc.load_all = true;
  sc.odirect = false;
  sc.io_threads = 2;
  moe::ExpertStore sa(in, gguf::layer_expert_parts(in), sc);
  moe::ExpertStore sb(out, gguf::layer_expert_parts(out), sc);
  const auto parts = gguf::layer_expert_parts(in);
  for (size_t l = 0; l < parts.size(); ++l) {
    if (!parts[l].present()) continue;
    EXPECT_EQ(sa.expert_bytes(static_cast<int>(l)), sb.expert_bytes(static_cast<int>(l)));
    std::vector<int> all(parts[l].n_expert());
    for (size_t e = 0; e < all.size(); ++e) all[e] = static_cast<int>(e);
    auto ba = sa.fetch(static_cast<int>(l), all);
    auto bb = sb.fetch(static_cast<int>(l), all);
    for (int i; (i = ba.next_ready()) >= 0;) ASSERT_EQ(bb.next_ready() >= 0, true);
    for (size_t e = 0; e < all.size(); ++e) {
      const moe::ExpertView x = ba.view(static_cast<int>(e)), y = bb.view(static_cast<int>(e));
      EXPECT_EQ(std::memcmp(x.gate, y.gate, parts[l].part[0].bytes), 0);
      EXPECT_EQ(std::memcmp(x.up, y.up, parts[l].part[1].bytes), 0);
      EXPECT_EQ(std::memcmp(x.down, y.down, parts[l].part[2].bytes), 0);
    }
  }
}

// ---- inspect -----------------------------------------------------------------

TEST_F(RepackTiny, InspectFiguresAreTheSameForBothLayouts) {
  const tools::ModelInfo a = tools::model_info(gguf::GgufModel::open(original()));
  const tools::ModelInfo b = tools::model_info(gguf::GgufModel::open(repacked()));
  EXPECT_EQ(a.file.expert_layout, "stacked");
  EXPECT_EQ(b.file.expert_layout, "expert-major");
  EXPECT_EQ(a.sizing.dense_bytes, b.sizing.dense_bytes);
  EXPECT_EQ(a.sizing.expert_bytes, b.sizing.expert_bytes);
  EXPECT_EQ(a.sizing.total_bytes, b.sizing.total_bytes);
  EXPECT_EQ(a.sizing.token_demand_bytes, b.sizing.token_demand_bytes);
  EXPECT_EQ(a.sizing.layer_demand_bytes, b.sizing.layer_demand_bytes);
  EXPECT_EQ(a.sizing.min_ram_bytes, b.sizing.min_ram_bytes);
  ASSERT_EQ(a.sizing.layers.size(), b.sizing.layers.size());
  for (size_t i = 0; i < a.sizing.layers.size(); ++i) {
    EXPECT_EQ(a.sizing.layers[i].layer, b.sizing.layers[i].layer);
    EXPECT_EQ(a.sizing.layers[i].n_expert, b.sizing.layers[i].n_expert);
    EXPECT_EQ(a.sizing.layers[i].expert_tensor_bytes, b.sizing.layers[i].expert_tensor_bytes);
    EXPECT_EQ(a.sizing.layers[i].per_expert_bytes, b.sizing.layers[i].per_expert_bytes);
  }
  int rc = 0;
  const std::string text = test::run_cmd(std::string(SLUICE_BINARY) + " inspect " + repacked() + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << text;
  EXPECT_THAT(text, HasSubstr("expert-major"));
  EXPECT_THAT(text, HasSubstr("blk.N.ffn_up_exps.E.weight"));
}

// ---- refusals ------------------------------------------------------------------

TEST_F(RepackTiny, RefusesRepackedInputSameFileAndExistingOutput) {
  TempDir d;
  tools::RepackOptions force;
  force.force = true;
  EXPECT_THAT(test::error_of([&] { tools::repack_expert_major(repacked(), d.file("x.gguf")); }),
              AllOf(HasSubstr(repacked()), HasSubstr("already expert-major")));
  EXPECT_THAT(test::error_of([&] { tools::repack_expert_major(original(), original(), force); }),
              AllOf(HasSubstr(original()), HasSubstr("is an input of this command")));
  const std::string existing = d.file("existing.gguf");
  { std::ofstream(existing) << "old"; }
  EXPECT_THAT(test::error_of([&] { tools::repack_expert_major(original(), existing); }),
              AllOf(HasSubstr(existing), HasSubstr("--force")));
  EXPECT_EQ(fs::file_size(existing), 3u);  // untouched
  tools::repack_expert_major(original(), existing, force);
  EXPECT_EQ(fs::file_size(existing), fs::file_size(repacked()));
  // Nothing but the output is left in the directory (no temporary file).
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path), fs::directory_iterator()), 1);
}

// Issue 17 finding 1: `repack M.partial M` used to open M.partial (its own
// input) as the writer's scratch file, emptying and then deleting it.
TEST_F(RepackTiny, InputNamedLikeTheOldScratchFileSurvives) {
  TempDir d;
  const std::string in = d.file("m.gguf.partial"), out = d.file("m.gguf");
  fs::copy_file(original(), in);
  const std::string before = test::file_bytes(in);
  tools::repack_expert_major(in, out);
  ASSERT_TRUE(fs::exists(in));
  EXPECT_EQ(test::file_bytes(in), before);
  EXPECT_EQ(fs::file_size(out), fs::file_size(repacked()));
  EXPECT_EQ(gguf::expert_layout(gguf::GgufModel::open(out)), gguf::ExpertLayout::ExpertMajor);
}

TEST(Repack, RefusesAModelWithoutExperts) {
  TempDir d;
  const std::string dense = d.file("dense.gguf");
  {
    gguf::Writer w(dense);
    w.add_metadata("general.architecture", gguf::Value::from_string("llama"));
    w.add_tensor("token_embd.weight", GgmlType::F32, {8, 4});
    w.write_header();
    const std::vector<float> zeros(32, 0.0f);
    w.write_tensor_data(zeros.data(), zeros.size() * sizeof(float));
    w.finish();
  }
  EXPECT_THAT(test::error_of([&] { tools::repack_expert_major(dense, d.file("out.gguf")); }),
              AllOf(HasSubstr(dense), HasSubstr("no stacked expert tensors")));
  EXPECT_FALSE(fs::exists(d.file("out.gguf")));
  EXPECT_THAT(test::error_of([&] { tools::repack_expert_major(d.file("missing.gguf"), d.file("out.gguf")); }),
              HasSubstr(d.file("missing.gguf")));
}

TEST_F(RepackTiny, CliWritesTheFileAndReportsErrors) {
  TempDir d;
  int rc = 0;
  const std::string bin = SLUICE_BINARY;
  const std::string out = d.file("cli.gguf");
  std::string text = test::run_cmd(bin + " repack " + original() + " " + out + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << text;
  EXPECT_THAT(text, AllOf(HasSubstr("repack: wrote " + out), HasSubstr("MB/s")));
  EXPECT_EQ(fs::file_size(out), fs::file_size(repacked()));
  text = test::run_cmd(bin + " repack " + original() + " " + out + " 2>&1", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(text, AllOf(HasSubstr("sluice: error: " + out), HasSubstr("--force")));
  text = test::run_cmd(bin + " repack " + original() + " " + out + " --force 2>&1", &rc);
  EXPECT_EQ(rc, 0) << text;
}

// ---- layout discovery errors --------------------------------------------------

// Writes an expert-major-tagged file with the given per-expert tensors
// ({name, type, ne}), zero-filled.
std::string write_major(const TempDir& d, const std::string& name,
                        const std::vector<std::tuple<std::string, GgmlType, std::vector<uint64_t>>>& tensors,
                        bool tag = true) {
  const std::string path = d.file(name);
  gguf::Writer w(path, kPage);
  if (tag) w.add_metadata(gguf::kExpertLayoutKey, gguf::Value::from_string("expert-major"));
  for (const auto& [n, type, ne] : tensors) w.add_tensor(n, type, ne);
  w.write_header();
  for (const auto& [n, type, ne] : tensors) {
    const std::vector<uint8_t> zeros(ne[0] * ne[1] * 4, 0);
    w.write_tensor_data(zeros.data(), zeros.size());
  }
  w.finish();
  return path;
}

TEST(ExpertLayout, ParsesBothNameForms) {
  auto n = gguf::parse_expert_tensor_name("blk.12.ffn_up_exps.weight");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->layer, 12u);
  EXPECT_EQ(n->part, gguf::kUp);
  EXPECT_FALSE(n->expert);
  n = gguf::parse_expert_tensor_name("blk.3.ffn_down_exps.127.weight");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->layer, 3u);
  EXPECT_EQ(n->part, gguf::kDown);
  EXPECT_EQ(n->expert, 127u);
  EXPECT_EQ(gguf::expert_major_name(3, gguf::kDown, 127), "blk.3.ffn_down_exps.127.weight");
  EXPECT_EQ(gguf::stacked_expert_name(12, gguf::kUp), "blk.12.ffn_up_exps.weight");
  for (const char* bad : {"blk.1.ffn_gate_exps.bias", "blk.1.ffn_gate_inp.weight", "blk.x.ffn_up_exps.weight",
                          "blk.1.ffn_up_exps.-1.weight", "blk.1.ffn_up_exps..weight", "token_embd.weight"})
    EXPECT_FALSE(gguf::parse_expert_tensor_name(bad)) << bad;
  EXPECT_TRUE(gguf::is_expert_tensor_name("blk.1.ffn_up_exps.7.weight"));
}

TEST(ExpertLayout, RejectsGapsMismatchesAndUntaggedFiles) {
  TempDir d;
  using T = std::tuple<std::string, GgmlType, std::vector<uint64_t>>;
  const auto f32 = GgmlType::F32;
  std::vector<T> ok;
  for (int e = 0; e < 2; ++e)
    for (size_t p = 0; p < 3; ++p) ok.push_back({gguf::expert_major_name(0, p, e), f32, {8, 4}});
  const auto m_ok = gguf::GgufModel::open(write_major(d, "ok.gguf", ok));
  const auto layers = gguf::layer_expert_parts(m_ok);
  ASSERT_EQ(layers.size(), 1u);
  EXPECT_EQ(layers[0].n_expert(), 2u);
  EXPECT_EQ(layers[0].expert_bytes(), 3u * 8 * 4 * 4);

  std::vector<T> gap = ok;
  gap.erase(gap.begin() + 3);  // expert 1's gate
  const std::string p_gap = write_major(d, "gap.gguf", gap);
  EXPECT_THAT(test::error_of([&] { gguf::layer_expert_parts(gguf::GgufModel::open(p_gap)); }),
              AllOf(HasSubstr(p_gap), HasSubstr("lacks tensor blk.0.ffn_gate_exps.1.weight")));

  std::vector<T> shape = ok;
  std::get<2>(shape[4]) = {8, 2};  // expert 1's up
  const std::string p_shape = write_major(d, "shape.gguf", shape);
  EXPECT_THAT(test::error_of([&] { gguf::layer_expert_parts(gguf::GgufModel::open(p_shape)); }),
              AllOf(HasSubstr(p_shape), HasSubstr("blk.0.ffn_up_exps.1.weight"), HasSubstr("must match")));

  const std::string p_untagged = write_major(d, "untagged.gguf", ok, false);
  EXPECT_THAT(test::error_of([&] { gguf::layer_expert_parts(gguf::GgufModel::open(p_untagged)); }),
              AllOf(HasSubstr(p_untagged), HasSubstr(gguf::kExpertLayoutKey)));
}

// ---- golden models --------------------------------------------------------------

TEST(RepackGolden, LogitsBitIdenticalOnEveryGoldenMoeModel) {
  const char* models[] = {"qwen3moe-f32", "qwen3moe-kquants", "qwen3moe-mixed", "qwen3moe-q8_0-q4_0",
                          "llama-moe-f32", "llama-moe-q8_0", "gpt-oss-mxfp4", "glm4moe-q8_0",
                          "deepseek2-q4_k"};
  TempDir d;
  int tested = 0;
  for (const char* name : models) {
    const std::string rel = std::string("golden/") + name + ".gguf";
    if (!test::shared_has(rel)) continue;
    const std::string in = test::shared_path(rel), out = d.file(std::string(name) + ".gguf");
    tools::repack_expert_major(in, out);
    const auto cfgs = io_configs();
    for (size_t c : {size_t{0}, size_t{1}, size_t{3}, size_t{4}}) {
      const RunResult a = run_model(in, cfgs[c].second);
      const RunResult b = run_model(out, cfgs[c].second);
      EXPECT_TRUE(same_bits(a.logits, b.logits)) << name << ", " << cfgs[c].first;
      if (c == 0) {
        EXPECT_EQ(a.io.experts_read, b.io.experts_read) << name;
        EXPECT_LT(b.io.reads, a.io.reads) << name;
      }
    }
    const tools::ModelInfo ia = tools::model_info(gguf::GgufModel::open(in));
    const tools::ModelInfo ib = tools::model_info(gguf::GgufModel::open(out));
    EXPECT_EQ(ia.sizing.expert_bytes, ib.sizing.expert_bytes) << name;
    EXPECT_EQ(ia.sizing.token_demand_bytes, ib.sizing.token_demand_bytes) << name;
    fs::remove(out);
    ++tested;
  }
  if (tested == 0) GTEST_SKIP() << "no golden MoE models under " << SLUICE_SHARED_DIR << "/golden";
}

}  // namespace
}  // namespace sluice
