// --resident-layout packed (ModelConfig::resident_layout): dense matmul
// weights in anon memory and resident experts (cache, --load-all) re-laid once
// into the kernels' packed layout. Logits must be bit-identical to the plain
// layout whatever holds the weights (anon / mmap dense set; cache off, cache
// hits, evictions, prefetch, --load-all), the thread count and the batching;
// and where a type has packed kernels the packing must really happen (and
// never touch what is read by row, e.g. a tied token_embd).
//
// Models: `sluice synth` tiny models per architecture (synthesized here), and
// a hand-written tied-embedding llama.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "kernels/quant.h"
#include "model/matmul.h"
#include "model_test_support.h"
#include "telemetry/telemetry.h"
#include "tools/synth.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

using model::ModelConfig;
using model::ResidentLayout;

const std::vector<int32_t> kPrompt = {1, 17, 33, 5, 60, 7, 91, 12, 3, 44, 2};


bool packable(GgmlType t) { return model::packable(kernels::kernels_for(t)); }

ModelConfig plain_mmap() {
  ModelConfig c = golden_config();
  c.odirect = false;
  c.threads = 1;
  c.dense_mode = moe::DenseMode::Mmap;
  c.resident_layout = ResidentLayout::Plain;
  return c;
}

ModelConfig packed_anon() {
  ModelConfig c = plain_mmap();
  c.dense_mode = moe::DenseMode::Anon;
  c.resident_layout = ResidentLayout::Packed;
  return c;
}

// The prompt's logits as one batch, then three greedy decode steps; with an
// MTP head also the head's logits over the prompt. one_at_a_time: the prompt
// is evaluated one position per eval instead (the same logits).
std::vector<float> fingerprint(model::Model& m, bool one_at_a_time = false) {
  const size_t nv = m.hparams().n_vocab;
  m.reset();
  std::vector<float> all(kPrompt.size() * nv);
  std::vector<float> hidden(kPrompt.size() * m.hparams().n_embd);
  if (one_at_a_time) {
    for (size_t i = 0; i < kPrompt.size(); ++i)
      m.eval(std::span<const int32_t>(&kPrompt[i], 1), static_cast<int>(i), &all[i * nv]);
  } else if (m.has_mtp()) {
    m.eval_hidden(kPrompt, 0, all.data(), hidden.data());
    std::vector<float> head(kPrompt.size() * nv);
    std::vector<int32_t> next(kPrompt.begin() + 1, kPrompt.end());
    next.push_back(kPrompt.front());
    m.mtp_eval(next, hidden.data(), 0, head.data(), nullptr);
    all.insert(all.end(), head.begin(), head.end());
  } else {
    m.eval(kPrompt, 0, all.data());
  }
  std::vector<float> last(all.begin() + static_cast<std::ptrdiff_t>((kPrompt.size() - 1) * nv),
                          all.begin() + static_cast<std::ptrdiff_t>(kPrompt.size() * nv));
  append_greedy_steps(m, all, std::move(last), static_cast<int>(kPrompt.size()), 3);
  return all;
}

std::string synth(const TempDir& d, tools::SynthConfig sc, const std::string& name) {
  const std::string path = d.file(name + ".gguf");
  tools::synth_model(sc, path, 1);
  return path;
}

// A qwen3moe wide enough for K-quants (256-wide rows), experts and dense
// matrices of the given types, two layers.
tools::SynthConfig qwen(GgmlType experts, GgmlType dense) {
  tools::SynthConfig sc = tools::synth_preset("tiny", "qwen3moe");
  sc.n_layer = 2;
  sc.n_embd = 256;
  sc.n_ff_exp = 256;
  sc.head_dim = 64;
  sc.expert_type = sc.down_type = experts;
  sc.attn_type = sc.attn_v_type = sc.output_type = dense;
  return sc;
}

struct TypeCase {
  GgmlType experts, dense;
};
const TypeCase kTypes[] = {{GgmlType::Q4_0, GgmlType::Q4_0},
                           {GgmlType::Q8_0, GgmlType::Q8_0},
                           {GgmlType::Q4_K, GgmlType::Q4_K},
                           {GgmlType::Q4_0, GgmlType::Q8_0}};

TEST(PackedModel, LogitsBitIdenticalAcrossLayoutsStorageThreadsAndBatching) {
  TempDir d;
  for (const TypeCase& tc : kTypes) {
    const std::string what = std::string(ggml_type_name(tc.experts)) + " experts, " +
                             std::string(ggml_type_name(tc.dense)) + " dense";
    const std::string path =
        synth(d, qwen(tc.experts, tc.dense), "qwen-" + std::to_string(&tc - kTypes));
    auto base_model = load(path, plain_mmap());
    const std::vector<float> want = fingerprint(*base_model);
    const uint64_t expert_bytes = base_model->expert_bytes(0);
    base_model.reset();

    struct Variant {
      std::string what;
      ModelConfig cfg;
    };
    std::vector<Variant> vs;
    auto add = [&](const std::string& w, auto&& set) {
      ModelConfig c = packed_anon();
      set(c);
      vs.push_back({w, c});
    };
    add("packed anon, cache off", [](ModelConfig&) {});
    add("packed anon, cache off, 2 threads", [](ModelConfig& c) { c.threads = 2; });
    add("packed anon, cache 64 MiB", [](ModelConfig& c) { c.cache_bytes = uint64_t{64} << 20; });
    add("packed anon, cache 64 MiB, 2 threads, prefetch 2", [](ModelConfig& c) {
      c.cache_bytes = uint64_t{64} << 20;
      c.threads = 2;
      c.prefetch = 2;
    });
    // Room for a few experts only: evictions, and uncached (private) buffers in prefill.
    add("packed anon, tight cache",
        [&](ModelConfig& c) { c.cache_bytes = 6 * (expert_bytes + 3 * 4096); });
    add("packed anon, load-all", [](ModelConfig& c) { c.load_all = true; });
    add("packed anon, load-all, 2 threads", [](ModelConfig& c) {
      c.load_all = true;
      c.threads = 2;
    });
    add("packed mmap, cache 64 MiB", [](ModelConfig& c) {
      c.dense_mode = moe::DenseMode::Mmap;
      c.cache_bytes = uint64_t{64} << 20;
    });
    add("packed warm, load-all", [](ModelConfig& c) {
      c.dense_mode = moe::DenseMode::Warm;
      c.load_all = true;
    });
    add("plain anon, cache 64 MiB", [](ModelConfig& c) {
      c.resident_layout = ResidentLayout::Plain;
      c.cache_bytes = uint64_t{64} << 20;
    });
    for (const Variant& v : vs) {
      auto m = load(path, v.cfg);
      EXPECT_TRUE(same_bits(fingerprint(*m), want)) << what << ": " << v.what;
      // Again on the same model: with a cache, now from hits.
      EXPECT_TRUE(same_bits(fingerprint(*m), want)) << what << ": " << v.what << ", second pass";
      if (v.cfg.cache_bytes >= (uint64_t{64} << 20)) {
        EXPECT_GT(m->stats().io.experts_hit, 0u) << v.what;
      }
    }
    // Prefill one position per eval gives the batch's logits (packed, resident experts).
    ModelConfig c = packed_anon();
    c.load_all = true;
    auto m = load(path, c);
    const std::vector<float> batch = fingerprint(*m);
    EXPECT_TRUE(same_bits(fingerprint(*m, true), batch)) << what << ": one position at a time";
  }
}

// Every architecture's weights (MLA projections, per-head k_b/v_b, dense
// FFN blocks, shared experts, NextN heads with their eh_proj) computed packed
// give the plain logits, and the MTP head's too.
TEST(PackedModel, EveryArchitectureGivesThePlainLogits) {
  TempDir d;
  struct ArchCase {
    std::string arch;
    bool dense = false;
    bool mtp = false;
  };
  const ArchCase cases[] = {{"qwen3moe"}, {"llama", true},          {"llama"},
                            {"gpt-oss"},  {"glm4moe", false, true}, {"deepseek2", false, true}};
  for (const ArchCase& a : cases) {
    tools::SynthConfig sc = tools::synth_preset("tiny", a.arch);
    if (a.dense) sc.n_expert = 0;
    if (a.mtp) sc.n_nextn = 1;
    const std::string name = a.arch + (a.dense ? "-dense" : "");
    const std::string path = synth(d, sc, name);
    ModelConfig plain = plain_mmap();
    plain.mtp = a.mtp;
    auto base = load(path, plain);
    const std::vector<float> want = fingerprint(*base);
    base.reset();
    for (int variant = 0; variant < 3; ++variant) {
      ModelConfig c = packed_anon();
      c.mtp = a.mtp;
      c.threads = variant == 2 ? 2 : 1;
      if (variant == 1) c.cache_bytes = uint64_t{64} << 20;
      if (variant == 2) c.load_all = true;
      if (a.dense) c.cache_bytes = 0, c.load_all = false;
      auto m = load(path, c);
      EXPECT_TRUE(same_bits(fingerprint(*m), want)) << name << " variant " << variant;
      EXPECT_TRUE(same_bits(fingerprint(*m), want))
          << name << " variant " << variant << ", second pass";
    }
  }
}

// Packing really happens where the kernels have a packed layout: dense bytes
// re-laid in anon mode (none with mmap or plain), experts re-laid on cache
// entry and at --load-all (none when streamed).
TEST(PackedModel, PackingHappensWhereTheKernelsHaveIt) {
  bool any = false;
  TempDir d;
  for (const TypeCase& tc : kTypes) {
    const bool dense_packable = packable(tc.dense), experts_packable = packable(tc.experts);
    if (!dense_packable && !experts_packable) continue;
    any = true;
    const std::string what = std::string(ggml_type_name(tc.experts)) + " experts, " +
                             std::string(ggml_type_name(tc.dense)) + " dense";
    const std::string path =
        synth(d, qwen(tc.experts, tc.dense), "pk-" + std::to_string(&tc - kTypes));

    ModelConfig c = packed_anon();
    c.load_all = true;
    auto m = load(path, c);
    fingerprint(*m);
    model::ModelStats s = m->stats();
    EXPECT_EQ(s.dense_packed_bytes > 0, dense_packable) << what;
    EXPECT_EQ(s.experts_packed, experts_packable) << what;
    // load-all: every expert of every MoE layer, once.
    EXPECT_EQ(s.io.experts_transformed, experts_packable ? uint64_t{2} * 16 : 0) << what;

    c.load_all = false;
    c.cache_bytes = uint64_t{64} << 20;
    m = load(path, c);
    fingerprint(*m);
    fingerprint(*m);
    s = m->stats();
    EXPECT_EQ(s.experts_packed, experts_packable) << what;
    // Each expert is re-laid once, when it enters the cache (64 MiB holds them all).
    EXPECT_EQ(s.io.experts_transformed, experts_packable ? s.io.experts_read : 0) << what;
    EXPECT_GT(s.io.experts_hit, 0u) << what;

    c.cache_bytes = 0;  // streamed: decode's experts (one position each) are never re-laid
    m = load(path, c);
    fingerprint(*m, /*one_at_a_time=*/true);
    s = m->stats();
    EXPECT_FALSE(s.experts_packed) << what;
    EXPECT_EQ(s.io.experts_transformed, 0u) << what;
    // A prompt batch: the experts kMinUsesToPackStreamed or more of its
    // entries use come packed, the others plain (44 entries over 16 experts).
    fingerprint(*m);
    s = m->stats();
    if (experts_packable) {
      EXPECT_GT(s.io.experts_transformed, 0u) << what;
      EXPECT_LT(s.io.experts_transformed, s.io.experts_read) << what;
    } else {
      EXPECT_EQ(s.io.experts_transformed, 0u) << what;
    }
    EXPECT_EQ(s.dense_packed_bytes > 0, dense_packable) << what;

    c.dense_mode = moe::DenseMode::Mmap;  // read-only mapping: stays plain
    m = load(path, c);
    EXPECT_EQ(m->stats().dense_packed_bytes, 0u) << what;

    c = packed_anon();
    c.resident_layout = ResidentLayout::Plain;
    c.load_all = true;
    m = load(path, c);
    s = m->stats();
    EXPECT_EQ(s.dense_packed_bytes, 0u) << what;
    EXPECT_FALSE(s.experts_packed) << what;
    EXPECT_EQ(s.io.experts_transformed, 0u) << what;
  }
  if (!any)
    GTEST_SKIP() << "no packed kernels (TypeKernels::pack_rows) for Q4_0, Q8_0 or Q4_K on this "
                    "CPU: nothing to pack";
}

// A llama whose lm head is the tied token_embd (no output.weight): the
// embedding is read by row, so it must stay plain while every other matmul
// weight is packed; the packed byte count says exactly which.
TEST(PackedModel, TiedEmbeddingStaysPlainAndEveryOtherMatrixIsPacked) {
  constexpr uint64_t kEmbd = 256, kVocab = 100, kFf = 288,
                     kKv = 128;  // vocab: not a multiple of 16
  const GgmlType q = GgmlType::Q8_0;
  TempDir d;
  const std::string path = d.file("tied.gguf");
  struct T {
    std::string n;
    GgmlType t;
    std::vector<uint64_t> ne;
  };
  const std::vector<T> ts = {{"token_embd.weight", q, {kEmbd, kVocab}},
                             {"output_norm.weight", GgmlType::F32, {kEmbd}},
                             {"blk.0.attn_norm.weight", GgmlType::F32, {kEmbd}},
                             {"blk.0.ffn_norm.weight", GgmlType::F32, {kEmbd}},
                             {"blk.0.attn_q.weight", q, {kEmbd, kEmbd}},
                             {"blk.0.attn_k.weight", q, {kEmbd, kKv}},
                             {"blk.0.attn_v.weight", q, {kEmbd, kKv}},
                             {"blk.0.attn_output.weight", q, {kEmbd, kEmbd}},
                             {"blk.0.ffn_gate.weight", q, {kEmbd, kFf}},
                             {"blk.0.ffn_up.weight", q, {kEmbd, kFf}},
                             {"blk.0.ffn_down.weight", q, {kFf, kEmbd}}};
  {
    gguf::Writer w(path);
    w.add_metadata("general.architecture", gguf::Value::from_string("llama"));
    w.add_metadata("llama.block_count", gguf::Value::from_u32(1));
    w.add_metadata("llama.embedding_length", gguf::Value::from_u32(kEmbd));
    w.add_metadata("llama.attention.head_count", gguf::Value::from_u32(4));
    w.add_metadata("llama.attention.head_count_kv", gguf::Value::from_u32(2));
    w.add_metadata("llama.feed_forward_length", gguf::Value::from_u32(kFf));
    w.add_metadata("llama.context_length", gguf::Value::from_u32(64));
    for (const T& t : ts) w.add_tensor(t.n, t.t, t.ne);
    w.write_header();
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 0.5f);
    for (const T& t : ts) {
      const uint64_t rows = t.ne.size() > 1 ? t.ne[1] : 1;
      std::vector<float> x(t.ne[0]);
      std::vector<uint8_t> row(*ggml_row_bytes(t.t, t.ne[0]));
      for (uint64_t r = 0; r < rows; ++r) {
        for (float& v : x) v = t.t == GgmlType::F32 ? 1.0f + 0.1f * nd(rng) : nd(rng);
        if (t.t == GgmlType::F32) {
          std::memcpy(row.data(), x.data(), row.size());
        } else {
          kernels::quantize_row(t.t, x.data(), row.data(), static_cast<int64_t>(t.ne[0]));
        }
        w.write_tensor_data(row.data(), row.size());
      }
    }
    w.finish();
  }
  ModelConfig plain = plain_mmap();
  auto base = load(path, plain);
  const std::vector<float> want = fingerprint(*base);
  base.reset();
  auto m = load(path, packed_anon());
  EXPECT_TRUE(same_bits(fingerprint(*m), want));
  if (!packable(q))
    GTEST_SKIP() << "no packed Q8_0 kernels on this CPU: the layout was not exercised";
  // Packed groups of every matrix but token_embd (also the lm head here).
  const uint64_t rb = *ggml_row_bytes(q, kEmbd);
  auto groups = [](uint64_t n_out) { return n_out / 16 * 16; };
  const uint64_t expect = rb * (groups(kEmbd) * 2 + groups(kKv) * 2 + groups(kFf) * 2) +
                          *ggml_row_bytes(q, kFf) * groups(kEmbd);
  EXPECT_EQ(m->stats().dense_packed_bytes, expect);
}

// -v and --json say which layout ran and what it packed.
TEST(PackedModel, SummarySaysTheLayoutAndWhatWasPacked) {
  telemetry::RunSummary s;
  s.dense_packed_bytes = uint64_t{3} << 20;
  s.experts_packed = true;
  s.experts_transformed = 96;
  EXPECT_NE(telemetry::summary_human(s).find("sluice: resident layout packed: dense 3.0 MiB packed; "
                                           "experts packed as they become resident "
                                           "(cache entry, --load-all) (96 re-laid)\n"),
            std::string::npos)
      << telemetry::summary_human(s);
  const nlohmann::ordered_json j = telemetry::summary_json(s);
  EXPECT_EQ(j["resident_layout"], "packed");
  EXPECT_EQ(j["dense_packed_MiB"].get<double>(), 3.0);
  EXPECT_EQ(j["experts_packed"], true);
  EXPECT_EQ(j["experts_transformed"], 96);
  s.experts_packed = false;  // cache off: only prompt-batch experts were re-laid
  s.experts_transformed = 7;
  EXPECT_NE(telemetry::summary_human(s).find("experts streamed: packed by the read lane where a prompt batch uses "
                                           "them several times (7 re-laid)\n"),
            std::string::npos)
      << telemetry::summary_human(s);
  s.resident_layout = ResidentLayout::Plain;
  s.dense_packed_bytes = 0;
  s.experts_transformed = 0;
  EXPECT_NE(telemetry::summary_human(s).find(
                "sluice: resident layout plain: dense 0.0 MiB packed; experts plain (0 re-laid)\n"),
            std::string::npos);
  EXPECT_EQ(telemetry::summary_json(s)["resident_layout"], "plain");
}

}  // namespace
}  // namespace sluice::test
