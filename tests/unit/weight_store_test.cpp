// ExpertStore and DenseWeights against small GGUF files written with seeded
// random tensor bytes. The reference is always the file itself, read through
// io::open_file at the offsets the GGUF parser reports.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "io/direct_reader.h"
#include "io/fault_file.h"
#include "io/file.h"
#include "io/mapping_guard.h"
#include "io/read_fully.h"
#include "moe/dense_weights.h"
#include "moe/expert_store.h"
#include "util/error.h"
#include "test_support.h"

namespace sluice::moe {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> ne;  // F32
};

// Writes one GGUF (or one split of a model) whose tensors hold seeded random bytes.
void write_model(const std::string& path, const std::vector<TensorSpec>& specs, uint32_t seed,
                 int split_no = -1, int split_count = 0) {
  gguf::Writer w(path);
  w.add_metadata("general.architecture", gguf::Value::from_string("test"));
  if (split_no >= 0) {
    gguf::Value no;
    no.type = gguf::ValueType::UINT16;
    no.u = static_cast<uint64_t>(split_no);
    gguf::Value count = no;
    count.u = static_cast<uint64_t>(split_count);
    w.add_metadata("split.no", no);
    w.add_metadata("split.count", count);
  }
  for (const auto& t : specs) w.add_tensor(t.name, GgmlType::F32, t.ne);
  w.write_header();
  std::mt19937 rng(seed);
  for (const auto& t : specs) {
    uint64_t n = 4;
    for (uint64_t d : t.ne) n *= d;
    std::vector<uint8_t> bytes(n);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    // Stream in uneven chunks, as a converter would.
    for (uint64_t done = 0; done < n;) {
      const uint64_t k = std::min<uint64_t>(n - done, 7777);
      w.write_tensor_data(bytes.data() + done, k);
      done += k;
    }
  }
  w.finish();
}

std::vector<TensorSpec> expert_layer(int l, uint64_t n_in, uint64_t n_ff, uint64_t n_expert) {
  const std::string p = "blk." + std::to_string(l) + ".";
  return {{p + "attn_norm.weight", {n_in}},
          {p + "ffn_gate_inp.weight", {n_in, n_expert}},
          {p + "ffn_gate_exps.weight", {n_in, n_ff, n_expert}},
          {p + "ffn_up_exps.weight", {n_in, n_ff, n_expert}},
          {p + "ffn_down_exps.weight", {n_ff, n_in, n_expert}}};
}

void append(std::vector<TensorSpec>& a, const std::vector<TensorSpec>& b) {
  a.insert(a.end(), b.begin(), b.end());
}

// Layer 0 dense; 1: small unaligned experts (4800 B); 2: experts over 1 MiB
// (split across lanes); 3: one expert, so gate/up/down are adjacent (merged);
// 4: last in the file, so the final O_DIRECT cover runs past end of file.
std::vector<TensorSpec> single_file_specs() {
  std::vector<TensorSpec> s = {{"token_embd.weight", {40, 100}},
                               {"blk.0.attn_norm.weight", {40}},
                               {"blk.0.ffn_gate.weight", {40, 30}},
                               {"blk.0.ffn_up.weight", {40, 30}},
                               {"blk.0.ffn_down.weight", {30, 40}}};
  append(s, expert_layer(1, 40, 30, 8));
  append(s, expert_layer(2, 512, 520, 3));
  append(s, expert_layer(3, 40, 30, 1));
  s.push_back({"output_norm.weight", {40}});
  s.push_back({"output.weight", {40, 100}});
  append(s, expert_layer(4, 24, 26, 6));
  return s;
}

class ModelFiles {
 public:
  ModelFiles() {
    // Under the working directory (the build dir, a real disk: O_DIRECT works there).
    dir_ = fs::current_path() / ("weight_store_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    single = (dir_ / "single.gguf").string();
    write_model(single, single_file_specs(), 1234);
    // Split model: experts in both splits, the dense token_embd in the first.
    std::vector<TensorSpec> s0 = {{"token_embd.weight", {40, 100}}};
    append(s0, expert_layer(0, 40, 30, 5));
    std::vector<TensorSpec> s1 = expert_layer(1, 48, 20, 4);
    s1.push_back({"output.weight", {40, 33}});
    split0 = (dir_ / "sp-00001-of-00002.gguf").string();
    write_model(split0, s0, 77, 0, 2);
    write_model((dir_ / "sp-00002-of-00002.gguf").string(), s1, 78, 1, 2);
  }
  ~ModelFiles() { fs::remove_all(dir_); }
  std::string single, split0;

 private:
  fs::path dir_;
};

ModelFiles& files() {
  static ModelFiles f;  // written once per test binary run
  return f;
}

bool is_expert_tensor(const gguf::TensorInfo& t) { return t.name.find("_exps") != std::string::npos; }

std::vector<LayerExperts> expert_layers(const gguf::GgufModel& m) {
  std::vector<LayerExperts> layers;
  for (int l = 0;; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    if (!m.find(p + "attn_norm.weight") && !m.find(p + "ffn_gate_exps.weight")) break;
    layers.push_back({m.find(p + "ffn_gate_exps.weight"), m.find(p + "ffn_up_exps.weight"),
                      m.find(p + "ffn_down_exps.weight")});
  }
  return layers;
}

std::vector<uint8_t> file_bytes(const gguf::GgufModel& m, const gguf::ByteRange& r) {
  std::vector<uint8_t> out(r.bytes);
  io::open_file(m.paths().at(r.split))->read_exact(out.data(), r.bytes, r.offset);
  return out;
}

void expect_view_matches(const gguf::GgufModel& m, const LayerExperts& le, int e,
                         const ExpertView& v) {
  const std::pair<const gguf::TensorInfo*, const void*> parts[] = {
      {le.gate, v.gate}, {le.up, v.up}, {le.down, v.down}};
  for (const auto& [t, p] : parts) {
    ASSERT_NE(p, nullptr);
    const gguf::ByteRange r = m.expert_range(*t, static_cast<uint64_t>(e));
    const std::vector<uint8_t> want = file_bytes(m, r);
    ASSERT_EQ(std::memcmp(want.data(), p, want.size()), 0) << t->name << " expert " << e;
  }
}

// Drains a batch, checking each index comes back exactly once and its bytes.
void drain_and_check(const gguf::GgufModel& m, const LayerExperts& le, ExpertStore::Batch& b,
                     const std::vector<int>& experts) {
  std::set<int> seen;
  for (int idx; (idx = b.next_ready()) != -1;) {
    ASSERT_GE(idx, 0);
    ASSERT_LT(idx, static_cast<int>(experts.size()));
    ASSERT_TRUE(seen.insert(idx).second) << "index " << idx << " returned twice";
    expect_view_matches(m, le, experts[static_cast<size_t>(idx)], b.view(idx));
  }
  EXPECT_EQ(seen.size(), experts.size());
  EXPECT_EQ(b.next_ready(), -1);  // stays exhausted
}

// Fetches `experts` of `layer` (a plain demand fetch) and drains it, checked.
void fetch_and_check(ExpertStore& store, const gguf::GgufModel& m, const std::vector<LayerExperts>& layers, int layer,
                     const std::vector<int>& experts) {
  auto b = store.fetch(layer, experts);
  drain_and_check(m, layers[static_cast<size_t>(layer)], b, experts);
}

using sluice::test::error_of;

// ---- ExpertStore: every expert of every layer, over the config matrix ----

using StoreParams = std::tuple<bool /*odirect*/, int /*io_threads*/, bool /*load_all*/>;

class WeightStoreExperts : public ::testing::TestWithParam<StoreParams> {};

// Every expert of every layer, all at once and then half of them, byte for
// byte against the file, under `cfg`.
void expect_every_expert_byte_identical(const ExpertStoreConfig& cfg) {
  const bool load_all = cfg.load_all;
  for (const std::string& path : {files().single, files().split0}) {
    SCOPED_TRACE(path);
    const gguf::GgufModel m = gguf::GgufModel::open(path);
    const auto layers = expert_layers(m);
    ExpertStore store(m, layers, cfg);
    std::mt19937 rng(99);
    uint64_t experts_total = 0;
    for (size_t l = 0; l < layers.size(); ++l) {
      if (!layers[l].gate) continue;
      const int n = static_cast<int>(layers[l].gate->ne[2]);
      std::vector<int> all(static_cast<size_t>(n));
      for (int e = 0; e < n; ++e) all[static_cast<size_t>(e)] = e;
      std::shuffle(all.begin(), all.end(), rng);
      // All experts at once, then a subset (slots are reused with new offsets).
      {
        auto b = store.fetch(static_cast<int>(l), all);
        EXPECT_EQ(b.size(), all.size());
        drain_and_check(m, layers[l], b, all);
      }
      std::vector<int> some(all.begin(), all.begin() + (n + 1) / 2);
      auto b = store.fetch(static_cast<int>(l), some);
      drain_and_check(m, layers[l], b, some);
      experts_total += all.size() + some.size();
      EXPECT_EQ(store.expert_bytes(static_cast<int>(l)),
                m.expert_range(*layers[l].gate, 0).bytes * 2 + m.expert_range(*layers[l].down, 0).bytes);
    }
    const ExpertIoStats st = store.stats();
    if (!load_all) {
      EXPECT_EQ(st.experts_read, experts_total);
      EXPECT_GE(st.reads, 3 * experts_total - 2 * 2);  // layer 3 merges its parts
    }
    EXPECT_GT(st.bytes_read, 0u);
  }
}

TEST_P(WeightStoreExperts, EveryExpertByteIdenticalToFile) {
  const auto [odirect, threads, load_all] = GetParam();
  ExpertStoreConfig cfg;
  cfg.odirect = odirect;
  cfg.io_threads = threads;
  cfg.load_all = load_all;
  expect_every_expert_byte_identical(cfg);
}

// --io-engine uring reads the same bytes as the pread lanes, at any depth,
// O_DIRECT or buffered, with and without --load-all.
TEST(WeightStoreUring, EveryExpertByteIdenticalToFile) {
  if (!io::uring_available()) GTEST_SKIP() << "this kernel gives no io_uring";
  for (int depth : {1, 4, 64}) {
    for (bool odirect : {false, true}) {
      for (bool load_all : {false, true}) {
        SCOPED_TRACE("depth " + std::to_string(depth) + (odirect ? " odirect" : " buffered") +
                     (load_all ? " load_all" : ""));
        ExpertStoreConfig cfg;
        cfg.io_engine = io::IoEngine::Uring;
        cfg.io_depth = depth;
        cfg.odirect = odirect;
        cfg.load_all = load_all;
        expect_every_expert_byte_identical(cfg);
      }
    }
  }
}

TEST(WeightStoreUring, InjectedEioSurfacesThroughTheUringEngine) {
  if (!io::uring_available()) GTEST_SKIP() << "this kernel gives no io_uring";  // qemu-user, seccomp
  // Wrapped (fault-injecting) files are not plain descriptors: the uring
  // thread reads them with read_exact, so faults surface as with pread.
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  ExpertStoreConfig cfg;
  cfg.io_engine = io::IoEngine::Uring;
  cfg.io_depth = 4;
  cfg.wrap_file = [](std::shared_ptr<const io::File> f) -> std::shared_ptr<const io::File> {
    io::FaultPlan plan;
    plan.fail_read = 2;
    return std::make_shared<io::FaultFile>(std::move(f), plan);
  };
  ExpertStore store(m, layers, cfg);
  const std::vector<int> experts = {4, 5, 6, 7};
  auto b = store.fetch(1, experts);
  const std::string msg = error_of([&] {
    while (b.next_ready() != -1) {
    }
  });
  EXPECT_THAT(msg, AllOf(HasSubstr(files().single), HasSubstr("at offset"), HasSubstr("Input/output error"),
                         HasSubstr("layer 1")));
}

INSTANTIATE_TEST_SUITE_P(Matrix, WeightStoreExperts,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(1, 2, 4, 8),
                                            ::testing::Bool()));

TEST(WeightStore, BatchesForTwoLayersCanOverlap) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  ExpertStore store(m, layers, {});
  const std::vector<int> a = {7, 0, 3}, b = {2, 1};
  auto b1 = store.fetch(1, a);
  auto b2 = store.fetch(2, b);  // prefetch the next layer while b1 is consumed
  drain_and_check(m, layers[1], b1, a);
  drain_and_check(m, layers[2], b2, b);
}

TEST(WeightStore, BatchDestroyedEarlyWaitsForReads) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  ExpertStoreConfig cfg;
  cfg.io_threads = 2;
  ExpertStore store(m, layers, cfg);
  const std::vector<int> all = {0, 1, 2};
  for (int round = 0; round < 20; ++round) {
    auto b = store.fetch(2, all);  // big experts: reads still in flight below
    if (round % 2 == 0) {
      ASSERT_GE(b.next_ready(), 0);
    }
  }
  {
    auto b = store.fetch(2, all);
    ExpertStore::Batch moved = std::move(b);  // a moved-from batch is inert
    EXPECT_EQ(b.next_ready(), -1);             // NOLINT(bugprone-use-after-move)
  }
  auto b = store.fetch(2, all);  // the store still works, with correct bytes
  drain_and_check(m, layers[2], b, all);
}

TEST(WeightStore, InjectedEioSurfacesAsErrorNamingFileAndOffset) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  for (bool odirect : {false, true}) {
    ExpertStoreConfig cfg;
    cfg.odirect = odirect;
    cfg.wrap_file = [](std::shared_ptr<const io::File> f) -> std::shared_ptr<const io::File> {
      io::FaultPlan plan;
      plan.fail_read = 2;
      return std::make_shared<io::FaultFile>(std::move(f), plan);
    };
    ExpertStore store(m, layers, cfg);
    const std::vector<int> experts = {4, 5, 6, 7};
    auto b = store.fetch(1, experts);
    const std::string msg = error_of([&] {
      while (b.next_ready() != -1) {
      }
    });
    EXPECT_THAT(msg, AllOf(HasSubstr(files().single), HasSubstr("at offset"),
                           HasSubstr("Input/output error"), HasSubstr("layer 1")));
  }
}

TEST(WeightStore, ShortReadsAndEintrAreRetried) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  auto faults = std::make_shared<std::vector<std::shared_ptr<io::FaultFile>>>();
  ExpertStoreConfig cfg;
  cfg.odirect = false;  // short reads would break O_DIRECT alignment
  cfg.io_threads = 3;
  cfg.wrap_file = [faults](std::shared_ptr<const io::File> f) -> std::shared_ptr<const io::File> {
    io::FaultPlan plan;
    plan.max_bytes_per_raw = 1000;
    plan.eintr_every = 3;
    auto ff = std::make_shared<io::FaultFile>(std::move(f), plan);
    faults->push_back(ff);
    return ff;
  };
  ExpertStore store(m, layers, cfg);
  const std::vector<int> experts = {5, 0, 2, 7};
  auto b = store.fetch(1, experts);
  drain_and_check(m, layers[1], b, experts);
  ASSERT_FALSE(faults->empty());
  EXPECT_GT(faults->front()->injected_eintr(), 0u);
  EXPECT_GT(faults->front()->raw_attempts(), faults->front()->calls());
}

TEST(WeightStore, ReadPastInjectedEndOfFileIsAnError) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  ExpertStoreConfig cfg;
  cfg.odirect = false;
  cfg.wrap_file = [](std::shared_ptr<const io::File> f) -> std::shared_ptr<const io::File> {
    io::FaultPlan plan;
    plan.eof_at = 1000;  // the file "shrank" after it was parsed
    return std::make_shared<io::FaultFile>(std::move(f), plan);
  };
  ExpertStore store(m, layers, cfg);
  auto b = store.fetch(4, std::vector<int>{5});
  EXPECT_THAT(error_of([&] { b.next_ready(); }),
              AllOf(HasSubstr(files().single), HasSubstr("unexpected end of file")));
}

TEST(WeightStore, BadRequestsAreErrors) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  ExpertStore store(m, layers, {});
  EXPECT_THAT(error_of([&] { store.fetch(0, std::vector<int>{0}); }), HasSubstr("layer 0 has no experts"));
  EXPECT_THAT(error_of([&] { store.fetch(9, std::vector<int>{0}); }), HasSubstr("layer 9 out of range"));
  EXPECT_THAT(error_of([&] { store.fetch(1, std::vector<int>{8}); }), HasSubstr("expert 8 out of range"));
  EXPECT_THAT(error_of([&] { store.fetch(1, std::vector<int>{-1}); }), HasSubstr("expert -1 out of range"));
  EXPECT_THAT(error_of([&] { store.fetch(1, std::vector<int>{2, 2}); }), HasSubstr("requested twice"));
  auto b = store.fetch(1, std::vector<int>{3});
  EXPECT_THAT(error_of([&] { b.view(0); }), HasSubstr("before next_ready"));
  EXPECT_EQ(b.next_ready(), 0);
  EXPECT_THAT(error_of([&] { b.view(1); }), HasSubstr("not an index"));
  auto empty = store.fetch(1, std::vector<int>{});
  EXPECT_EQ(empty.next_ready(), -1);
  ExpertStoreConfig bad;
  bad.io_threads = 0;
  EXPECT_THAT(error_of([&] { ExpertStore s(m, layers, bad); }), HasSubstr("--io-threads"));
}

// ---- ExpertStore with the expert cache ----

// Every layer's expert count, for building request sequences.
std::vector<int> experts_per_layer(const std::vector<LayerExperts>& layers) {
  std::vector<int> n;
  for (const auto& le : layers) n.push_back(le.gate ? static_cast<int>(le.gate->ne[2]) : 0);
  return n;
}

// Allocated bytes of every expert of the model, as the cache accounts them:
// read everything once with an unbounded cache.
uint64_t all_experts_footprint(const gguf::GgufModel& m, const std::vector<LayerExperts>& layers) {
  ExpertStoreConfig cfg;
  cfg.cache_bytes = uint64_t{1} << 40;
  ExpertStore store(m, layers, cfg);
  const auto n = experts_per_layer(layers);
  for (size_t l = 0; l < layers.size(); ++l) {
    std::vector<int> all;
    for (int e = 0; e < n[l]; ++e) all.push_back(e);
    if (all.empty()) continue;
    auto b = store.fetch(static_cast<int>(l), all);
    drain_and_check(m, layers[l], b, all);
  }
  const ExpertIoStats st = store.stats();
  EXPECT_EQ(st.cache_evictions, 0u);
  return st.cache_bytes_resident;
}

TEST(WeightStoreCache, ByteIdenticalFromFloorToEverything) {
  for (const std::string& path : {files().single, files().split0}) {
    SCOPED_TRACE(path);
    const gguf::GgufModel m = gguf::GgufModel::open(path);
    const auto layers = expert_layers(m);
    const auto n = experts_per_layer(layers);
    const uint64_t everything = all_experts_footprint(m, layers);
    ASSERT_GT(everything, 0u);
    // A fixed random request stream: up to 3 experts of a random MoE layer.
    std::mt19937 rng(7);
    std::vector<std::pair<int, std::vector<int>>> requests;
    uint64_t requested = 0;
    std::set<std::pair<int, int>> distinct;
    while (requests.size() < 60) {
      const int l = static_cast<int>(rng() % layers.size());
      if (n[static_cast<size_t>(l)] == 0) continue;
      std::vector<int> all(static_cast<size_t>(n[static_cast<size_t>(l)]));
      for (size_t e = 0; e < all.size(); ++e) all[e] = static_cast<int>(e);
      std::shuffle(all.begin(), all.end(), rng);
      all.resize(std::min<size_t>(all.size(), 1 + rng() % 3));
      for (int e : all) distinct.emplace(l, e);
      requested += all.size();
      requests.emplace_back(l, std::move(all));
    }
    // From below the widest expert (which is then never cached) up to everything.
    uint64_t middle_evictions = 0;
    for (uint64_t budget : {uint64_t{0}, everything / 8, everything / 3, everything / 2, everything}) {
      SCOPED_TRACE("cache_bytes " + std::to_string(budget));
      ExpertStoreConfig cfg;
      cfg.cache_bytes = budget;
      cfg.io_threads = 3;
      ExpertStore store(m, layers, cfg);
      for (const auto& [l, ex] : requests) {
        auto b = store.fetch(l, ex);
        drain_and_check(m, layers[static_cast<size_t>(l)], b, ex);
      }
      const ExpertIoStats st = store.stats();
      EXPECT_EQ(st.experts_hit + st.experts_read, requested);
      EXPECT_LE(st.cache_peak_bytes, budget);
      EXPECT_LE(st.cache_bytes_resident, budget);
      if (budget == 0) {
        EXPECT_EQ(st.experts_hit, 0u);
      } else if (budget == everything) {
        EXPECT_EQ(st.experts_read, distinct.size());  // each expert read exactly once
        EXPECT_EQ(st.cache_evictions, 0u);
      } else {
        EXPECT_GT(st.experts_hit, 0u);
        EXPECT_GT(st.experts_read, distinct.size());  // evicted or uncacheable experts are read again
        middle_evictions += st.cache_evictions;
      }
    }
    EXPECT_GT(middle_evictions, 0u);  // memory is given back as the budget demands
  }
}

TEST(WeightStoreCache, HitsAreReadyAtOnceAndCountBytes) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  ExpertStoreConfig cfg;
  cfg.cache_bytes = 64 << 20;
  ExpertStore store(m, layers, cfg);
  const std::vector<int> first = {2, 0}, second = {0, 1, 2};
  {
    auto b = store.fetch(2, first);
    drain_and_check(m, layers[2], b, first);
  }
  auto b = store.fetch(2, second);
  // The two hits are ready before the read of expert 1: indices 0 and 2 first.
  const int a = b.next_ready(), c = b.next_ready();
  EXPECT_EQ(std::min(a, c), 0);
  EXPECT_EQ(std::max(a, c), 2);
  expect_view_matches(m, layers[2], 0, b.view(0));
  expect_view_matches(m, layers[2], 2, b.view(2));
  EXPECT_EQ(b.next_ready(), 1);
  expect_view_matches(m, layers[2], 1, b.view(1));
  const ExpertIoStats st = store.stats();
  EXPECT_EQ(st.experts_hit, 2u);
  EXPECT_EQ(st.experts_read, 3u);
  EXPECT_EQ(st.bytes_hit, 2 * store.expert_bytes(2));
}

// ExpertStoreConfig::on_resident (the model's packed layout) is applied exactly
// once to every expert that stays resident (cached, including the private
// buffer of one the cache cannot keep, and --load-all), before any view of it
// is handed out, and to streamed experts only where the fetch asks
// (FetchOptions::transform_streamed, mode 4 below); ExpertView::packed says which.
// The transform here XORs each part with a per-layer key, so applying it twice
// or not at all shows in the bytes.
TEST(WeightStoreCache, OnResidentIsAppliedOnceBeforeAnyReaderSeesTheExpert) {
  for (const std::string& path : {files().single, files().split0}) {
    SCOPED_TRACE(path);
    const gguf::GgufModel m = gguf::GgufModel::open(path);
    const auto layers = expert_layers(m);
    const auto n = experts_per_layer(layers);
    const uint64_t everything = all_experts_footprint(m, layers);
    auto key = [](int layer) { return static_cast<uint8_t>(0x5A + layer); };
    std::atomic<uint64_t> calls{0};
    ExpertTransform xor_parts = [&](int layer, void* gate, void* up, void* down) {
      const LayerExperts& le = layers.at(static_cast<size_t>(layer));
      const std::pair<const gguf::TensorInfo*, void*> parts[] = {{le.gate, gate}, {le.up, up}, {le.down, down}};
      for (const auto& [t, p] : parts) {
        auto* b = static_cast<uint8_t*>(p);
        for (uint64_t i = 0; i < m.expert_range(*t, 0).bytes; ++i) b[i] ^= key(layer);
      }
      ++calls;
    };
    auto expect_view = [&](int l, int e, const ExpertView& v, bool packed) {
      ASSERT_EQ(v.packed, packed) << "layer " << l << " expert " << e;
      const LayerExperts& le = layers[static_cast<size_t>(l)];
      const std::pair<const gguf::TensorInfo*, const void*> parts[] = {{le.gate, v.gate}, {le.up, v.up}, {le.down, v.down}};
      for (const auto& [t, p] : parts) {
        std::vector<uint8_t> want = file_bytes(m, m.expert_range(*t, static_cast<uint64_t>(e)));
        if (packed)
          for (uint8_t& b : want) b ^= key(l);
        ASSERT_EQ(std::memcmp(want.data(), p, want.size()), 0) << t->name << " expert " << e;
      }
    };
    // budget 0: streamed; everything / 8: evictions and uncacheable experts; everything: all hits;
    // 3: --load-all; 4: streamed, every other expert of each fetch asked to come transformed
    // (the flags are ignored in modes 1-3, which get them too).
    for (int mode = 0; mode < 5; ++mode) {
      ExpertStoreConfig cfg;
      cfg.io_threads = 3;
      cfg.on_resident = xor_parts;
      cfg.load_all = mode == 3;
      cfg.cache_bytes = mode == 0 || mode == 4 ? 0 : mode == 1 ? everything / 8 : everything;
      SCOPED_TRACE("mode " + std::to_string(mode));
      calls = 0;
      ExpertStore store(m, layers, cfg);
      std::mt19937 rng(3);
      uint64_t asked = 0;
      for (int round = 0; round < 3; ++round) {
        for (size_t l = 0; l < layers.size(); ++l) {
          if (n[l] == 0) continue;
          std::vector<int> ex(static_cast<size_t>(n[l]));
          for (size_t e = 0; e < ex.size(); ++e) ex[e] = static_cast<int>(e);
          std::shuffle(ex.begin(), ex.end(), rng);
          ex.resize(std::min<size_t>(ex.size(), 1 + rng() % 3));
          std::vector<uint8_t> flags(ex.size());
          for (size_t i = 0; i < flags.size(); ++i) flags[i] = (round + i) % 2;
          FetchOptions opt;
          if (mode != 0) opt.transform_streamed = flags;
          auto b = store.fetch(static_cast<int>(l), ex, opt);
          for (int idx; (idx = b.next_ready()) != -1;) {
            const bool flag = flags[static_cast<size_t>(idx)] != 0;
            asked += flag;
            expect_view(static_cast<int>(l), ex[static_cast<size_t>(idx)], b.view(idx),
                        mode == 4 ? flag : mode != 0);
          }
        }
      }
      const ExpertIoStats st = store.stats();
      EXPECT_EQ(st.experts_transformed, calls.load());
      uint64_t all = 0;
      for (int k : n) all += static_cast<uint64_t>(k);
      // Streamed: never unless asked; cached: every read, never a hit; --load-all: every expert once.
      const uint64_t want = mode == 0 ? 0 : mode == 3 ? all : mode == 4 ? asked : st.experts_read;
      if (mode == 4) {
        EXPECT_GT(asked, 0u);
        EXPECT_LT(asked, st.experts_read);
      }
      EXPECT_EQ(calls.load(), want);
      if (mode == 2) {
        EXPECT_GT(st.experts_hit, 0u);
      } else if (mode != 1) {
        EXPECT_EQ(st.experts_hit, 0u);  // streamed; --load-all: the store counts no hits
      }
      if (mode == 4) {  // one flag per requested expert, or none
        const std::vector<int> two = {0, 1};
        const std::vector<uint8_t> one_flag = {1};
        FetchOptions bad;
        bad.transform_streamed = one_flag;
        EXPECT_THROW(store.fetch(1, two, bad), Error);
      }
    }
  }
}

// A transform that throws surfaces from next_ready() as an Error naming the
// expert, and its half re-laid bytes are never cached (cache on) or handed
// out (a streamed expert asked to come transformed).
TEST(WeightStoreCache, AThrowingTransformIsAnErrorAndNeverCached) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  for (const uint64_t cache : {uint64_t{64} << 20, uint64_t{0}}) {
    SCOPED_TRACE("cache bytes " + std::to_string(cache));
    ExpertStoreConfig cfg;
    cfg.cache_bytes = cache;
    cfg.on_resident = [](int, void*, void*, void*) { throw Error("transform refused"); };
    ExpertStore store(m, layers, cfg);
    const std::vector<int> want = {1};
    const std::vector<uint8_t> flag = {1};
    FetchOptions opt;
    opt.transform_streamed = flag;
    auto b = store.fetch(2, want, opt);
    try {
      b.next_ready();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("transform refused (expert 1 of layer 2)"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(store.is_cached(2, 1));
    EXPECT_EQ(store.stats().experts_transformed, 0u);
  }
}

// --drop-cold-experts asks is_cached(): it must follow the cache, or cached
// experts would be dropped (and their bytes counted as saved) for nothing.
TEST(WeightStoreCache, IsCachedFollowsTheCache) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  ExpertStoreConfig cfg;
  cfg.cache_bytes = 64 << 20;
  ExpertStore cached(m, layers, cfg);
  EXPECT_FALSE(cached.is_cached(2, 1));
  fetch_and_check(cached, m, layers, 2, {1});
  EXPECT_TRUE(cached.is_cached(2, 1));
  EXPECT_FALSE(cached.is_cached(2, 0));
  cfg.cache_bytes = 0;
  ExpertStore uncached(m, layers, cfg);
  fetch_and_check(uncached, m, layers, 2, {1});
  EXPECT_FALSE(uncached.is_cached(2, 1));
  cfg.load_all = true;
  ExpertStore all(m, layers, cfg);
  EXPECT_TRUE(all.is_cached(2, 0));
}

TEST(WeightStoreCache, PinnedWhileABatchUsesThem) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  const uint64_t everything = all_experts_footprint(m, layers);
  ExpertStoreConfig cfg;
  cfg.cache_bytes = everything / 4;  // far less than the two batches below need together
  ExpertStore store(m, layers, cfg);
  const std::vector<int> big = {0, 1, 2}, small = {7, 6, 5, 4, 3, 2, 1, 0};
  for (int round = 0; round < 4; ++round) {
    auto b1 = store.fetch(2, big);
    auto b2 = store.fetch(1, small);  // inserting these must not evict b1's experts
    auto b3 = store.fetch(2, big);    // the same experts again, while b1 is alive
    drain_and_check(m, layers[1], b2, small);
    drain_and_check(m, layers[2], b1, big);
    drain_and_check(m, layers[2], b3, big);
    EXPECT_LE(store.stats().cache_bytes_resident, cfg.cache_bytes);
  }
}

// Allocated cache bytes of one expert: cache it alone and ask the cache.
uint64_t expert_footprint(const gguf::GgufModel& m, const std::vector<LayerExperts>& layers, int layer, int e) {
  ExpertStoreConfig cfg;
  cfg.cache_bytes = 64 << 20;
  ExpertStore store(m, layers, cfg);
  fetch_and_check(store, m, layers, layer, {e});
  return store.stats().cache_bytes_resident;
}

// FetchOptions::speculative (the next layer's prefetch): until use(), the
// cache is as it was: nothing inserted, counted, or made recently used; the
// bytes served are the file's all the same.
TEST(WeightStoreCache, SpeculativeFetchChangesTheCacheOnlyAtUse) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  const uint64_t fp0 = expert_footprint(m, layers, 2, 0), fp1 = expert_footprint(m, layers, 2, 1),
                 fp2 = expert_footprint(m, layers, 2, 2);
  ExpertStoreConfig cfg;
  // Holds 0 and 1, and 2 with either one of them: caching 2 evicts one expert.
  cfg.cache_bytes = fp1 + std::max(fp0, fp2);
  ExpertStore store(m, layers, cfg);
  for (int e : {0, 1}) fetch_and_check(store, m, layers, 2, {e});  // LRU order [0 1]
  const ExpertIoStats before = store.stats();
  FetchOptions spec;
  spec.speculative = true;
  const std::vector<int> guess = {2, 0};  // a miss, and the least recently used hit
  {
    auto b = store.fetch(2, guess, spec);
    drain_and_check(m, layers[2], b, guess);
    EXPECT_FALSE(store.is_cached(2, 2));  // read, but not cached before use
    const ExpertIoStats st = store.stats();
    EXPECT_EQ(st.experts_read, before.experts_read + 1);
    EXPECT_EQ(st.experts_hit, before.experts_hit);  // a peeked hit is not a hit yet
    EXPECT_EQ(st.cache_evictions, 0u);
  }  // neither used: the read is counted unused, the hit untouched
  EXPECT_EQ(store.stats().experts_unused, 1u);
  EXPECT_FALSE(store.is_cached(2, 2));
  fetch_and_check(store, m, layers, 2, {2});  // 0 is still least recently used: it goes, not 1
  EXPECT_FALSE(store.is_cached(2, 0));
  EXPECT_TRUE(store.is_cached(2, 1));
  EXPECT_TRUE(store.is_cached(2, 2));
  // Now use both guesses of a speculative batch: {0 (a miss), 1 (a hit)}.
  const ExpertIoStats mid = store.stats();
  const std::vector<int> guess2 = {0, 1};
  {
    auto b = store.fetch(2, guess2, spec);
    drain_and_check(m, layers[2], b, guess2);
    EXPECT_FALSE(store.is_cached(2, 0));
    b.use(1);  // the hit: counted, and most recently used
    b.use(1);  // once only
    EXPECT_EQ(store.stats().experts_hit, mid.experts_hit + 1);
    EXPECT_EQ(store.stats().bytes_hit, mid.bytes_hit + store.expert_bytes(2));
    b.use(0);  // the read: cached now, evicting the least recently used (2)
    EXPECT_TRUE(store.is_cached(2, 0));
    EXPECT_TRUE(store.is_cached(2, 1));
    EXPECT_FALSE(store.is_cached(2, 2));
  }
  EXPECT_EQ(store.stats().experts_unused, 1u);  // both were used
  const std::vector<int> both = {0, 1};
  fetch_and_check(store, m, layers, 2, both);  // served from the cache, whole
  EXPECT_EQ(store.stats().experts_read, mid.experts_read + 1);
  EXPECT_THAT(error_of([&] { store.fetch(2, both, spec).use(0); }), HasSubstr("before next_ready()"));
}

// A speculative read is re-laid (on_resident) at use(), on the caller's
// thread, and never when the guess is not used: a wrong guess costs no CPU.
TEST(WeightStoreCache, SpeculativeReadsAreReLaidAtUseOnly) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  const LayerExperts& le = layers[2];
  std::atomic<int> calls{0};
  std::thread::id caller;
  ExpertStoreConfig cfg;
  cfg.cache_bytes = 64 << 20;
  cfg.on_resident = [&](int, void* gate, void* up, void* down) {
    for (auto [t, p] : {std::pair{le.gate, gate}, std::pair{le.up, up}, std::pair{le.down, down}})
      for (uint64_t i = 0; i < m.expert_range(*t, 0).bytes; ++i) static_cast<uint8_t*>(p)[i] ^= 0xA5;
    caller = std::this_thread::get_id();
    ++calls;
  };
  auto expect_bytes = [&](int e, const ExpertView& v, bool relaid) {
    ASSERT_EQ(v.packed, relaid);
    for (auto [t, p] : {std::pair{le.gate, v.gate}, std::pair{le.up, v.up}, std::pair{le.down, v.down}}) {
      std::vector<uint8_t> want = file_bytes(m, m.expert_range(*t, static_cast<uint64_t>(e)));
      if (relaid)
        for (uint8_t& b : want) b ^= 0xA5;
      ASSERT_EQ(std::memcmp(want.data(), p, want.size()), 0) << t->name << " expert " << e;
    }
  };
  ExpertStore store(m, layers, cfg);
  FetchOptions spec;
  spec.speculative = true;
  const std::vector<int> guess = {0, 1};
  {
    auto b = store.fetch(2, guess, spec);
    for (int idx; (idx = b.next_ready()) != -1;) expect_bytes(guess[static_cast<size_t>(idx)], b.view(idx), false);
    EXPECT_EQ(calls.load(), 0);
    b.use(0);
    EXPECT_EQ(calls.load(), 1);
    EXPECT_EQ(caller, std::this_thread::get_id());
    expect_bytes(0, b.view(0), true);
  }
  EXPECT_EQ(calls.load(), 1);  // the unused guess was never re-laid
  EXPECT_EQ(store.stats().experts_transformed, 1u);
  const std::vector<int> both = {0, 1};
  auto b = store.fetch(2, both);  // 0: a hit, re-laid once; 1: read again, re-laid by its lane
  for (int idx; (idx = b.next_ready()) != -1;) expect_bytes(both[static_cast<size_t>(idx)], b.view(idx), true);
  EXPECT_EQ(calls.load(), 2);
}

// Cache off, streamed experts asked to come re-laid: a guess that settle()
// drops before its reads run is never re-laid (its bytes were never read).
TEST(WeightStore, DroppedGuessesAreNotReLaid) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  ExpertStoreConfig cfg;
  cfg.io_threads = 1;  // the demand reads below keep the one lane busy
  cfg.on_resident = [](int, void*, void*, void*) {};
  ExpertStore store(m, layers, cfg);
  const std::vector<int> demand = {0, 1, 2}, guesses = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<uint8_t> all3(3, 1), all8(8, 1), none(8, 0);
  FetchOptions opt;
  opt.transform_streamed = all3;
  auto d = store.fetch(2, demand, opt);  // 3 experts over 1 MiB each, queued first
  FetchOptions spec;
  spec.transform_streamed = all8;
  spec.speculative = true;
  {
    auto g = store.fetch(1, guesses, spec);
    g.settle(none);  // nothing needed: every guess not started is dropped
    for (int idx; (idx = g.next_ready()) != -1;) {
    }
  }
  drain_and_check(m, layers[2], d, demand);
  const ExpertIoStats st = store.stats();
  EXPECT_EQ(st.experts_transformed, st.experts_read);  // only what was read in full
  EXPECT_LT(st.experts_read, demand.size() + guesses.size()) << "no guess was dropped";
  EXPECT_THROW(d.settle(none), Error);  // one flag per expert
}

TEST(WeightStoreCache, AbandonedAndFailedReadsAreNotCached) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  {
    ExpertStoreConfig cfg;
    cfg.io_threads = 2;
    cfg.cache_bytes = 64 << 20;
    ExpertStore store(m, layers, cfg);
    const std::vector<int> all = {0, 1, 2};
    for (int round = 0; round < 20; ++round) {
      auto b = store.fetch(2, all);  // destroyed with reads still queued (skipped)
      if (round % 2 == 0) {
        ASSERT_GE(b.next_ready(), 0);
      }
    }
    auto b = store.fetch(2, all);  // whatever was cached is whole
    drain_and_check(m, layers[2], b, all);
  }
  ExpertStoreConfig cfg;
  cfg.io_threads = 1;  // one lane: read 2 is the second part of expert 4
  cfg.odirect = false;
  cfg.cache_bytes = 64 << 20;
  cfg.wrap_file = [](std::shared_ptr<const io::File> f) -> std::shared_ptr<const io::File> {
    io::FaultPlan plan;
    plan.fail_read = 2;
    return std::make_shared<io::FaultFile>(std::move(f), plan);
  };
  ExpertStore store(m, layers, cfg);
  const std::vector<int> experts = {4, 5, 6, 7};
  {
    auto b = store.fetch(1, experts);
    EXPECT_THAT(error_of([&] {
                  while (b.next_ready() != -1) {
                  }
                }),
                HasSubstr("Input/output error"));
  }
  auto b = store.fetch(1, experts);  // read again, not served from a broken copy
  drain_and_check(m, layers[1], b, experts);
  EXPECT_EQ(store.stats().experts_hit, 0u);
}

// ---- DenseWeights ----

class WeightStoreDense : public ::testing::TestWithParam<DenseMode> {};

TEST_P(WeightStoreDense, ByteIdenticalAndResident) {
  for (const std::string& path : {files().single, files().split0}) {
    SCOPED_TRACE(path);
    const gguf::GgufModel m = gguf::GgufModel::open(path);
    DenseConfig cfg;
    cfg.mode = GetParam();
    DenseWeights dw(m, cfg, is_expert_tensor);
    EXPECT_EQ(dw.mode(), GetParam());
    uint64_t dense_bytes = 0;
    for (const gguf::TensorInfo& t : m.tensors()) {
      if (is_expert_tensor(t)) {
        EXPECT_THAT(error_of([&] { dw.data(t); }), HasSubstr(t.name));
        continue;
      }
      dense_bytes += t.bytes;
      const std::vector<uint8_t> want = file_bytes(m, {t.split, t.offset, t.bytes});
      const void* p = dw.data(t);
      ASSERT_EQ(std::memcmp(want.data(), p, want.size()), 0) << t.name;
      gguf::TensorInfo copy = t;  // lookup by name works for copies too
      EXPECT_EQ(dw.data(copy), p);
    }
    EXPECT_EQ(dw.bytes(), dense_bytes);
    const double f = dw.resident_fraction();
    EXPECT_GE(f, 0.0);
    EXPECT_LE(f, 1.0);
    if (GetParam() != DenseMode::Mmap) {
      EXPECT_GE(f, 0.99);
    }
    EXPECT_FALSE(dw.used_buffered_fallback());  // the build dir supports O_DIRECT
    // writable(): the anon copy itself (the model re-lays it in place); none
    // for read-only mappings.
    for (const gguf::TensorInfo& t : m.tensors()) {
      if (is_expert_tensor(t)) continue;
      EXPECT_EQ(dw.writable(t), GetParam() == DenseMode::Anon ? dw.data(t) : nullptr) << t.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, WeightStoreDense,
                         ::testing::Values(DenseMode::Anon, DenseMode::Warm, DenseMode::Mmap),
                         [](const auto& info) { return std::string(dense_mode_name(info.param)); });

TEST(WeightStore, DenseAnonBufferedMatchesDirect) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  DenseConfig direct, buffered;
  buffered.odirect = false;
  DenseWeights a(m, direct, is_expert_tensor), b(m, buffered, is_expert_tensor);
  for (const gguf::TensorInfo& t : m.tensors()) {
    if (is_expert_tensor(t)) continue;
    EXPECT_EQ(std::memcmp(a.data(t), b.data(t), t.bytes), 0) << t.name;
  }
  EXPECT_FALSE(b.used_buffered_fallback());  // not refused, just not asked for
}

// Where a tmpfs refuses O_DIRECT, both stores must fall back to buffered reads.
TEST(WeightStore, FallbackWhereODirectIsRefused) {
  const fs::path dir = "/dev/shm";
  struct statfs sfs {};
  if (::statfs(dir.c_str(), &sfs) != 0) GTEST_SKIP() << "/dev/shm not available";
  const fs::path path = dir / ("sluice_ws_" + std::to_string(::getpid()) + ".gguf");
  write_model(path.string(), single_file_specs(), 5);
  struct Cleanup {
    fs::path p;
    ~Cleanup() { fs::remove(p); }
  } cleanup{path};
  const bool refused = io::open_fd_file(path.string(), /*direct=*/true) == nullptr;
  const gguf::GgufModel m = gguf::GgufModel::open(path.string());
  DenseWeights dw(m, {}, is_expert_tensor);
  EXPECT_EQ(dw.used_buffered_fallback(), refused);
  const auto& t = m.require("output.weight");
  EXPECT_EQ(std::memcmp(file_bytes(m, {t.split, t.offset, t.bytes}).data(), dw.data(t), t.bytes), 0);
  const auto layers = expert_layers(m);
  ExpertStore store(m, layers, {});
  EXPECT_EQ(store.direct_io(), !refused);
  const std::vector<int> experts = {1, 4};
  auto b = store.fetch(4, experts);
  drain_and_check(m, layers[4], b, experts);
  if (!refused) GTEST_SKIP() << "this kernel's tmpfs accepts O_DIRECT; fallback not exercised";
}

// ---- Fault injection into the dense load and expert reads ----

// A wrap_file hook that puts every opened file in a FaultFile with `plan` and
// remembers the wrappers (so tests can see the injected faults happened).
struct FaultHook {
  io::FaultPlan plan;
  std::shared_ptr<std::vector<std::shared_ptr<io::FaultFile>>> made =
      std::make_shared<std::vector<std::shared_ptr<io::FaultFile>>>();
  io::WrapFile hook() const {
    return [plan = plan, made = made](std::shared_ptr<const io::File> f) -> std::shared_ptr<const io::File> {
      auto ff = std::make_shared<io::FaultFile>(std::move(f), plan);
      made->push_back(ff);
      return ff;
    };
  }
  uint64_t injected_eintr() const {
    uint64_t n = 0;
    for (const auto& f : *made) n += f->injected_eintr();
    return n;
  }
};

TEST(DenseFaults, EioAtDenseLoadIsAnErrorNamingFileAndOffset) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  for (bool odirect : {false, true}) {
    SCOPED_TRACE(odirect ? "O_DIRECT" : "buffered");
    FaultHook h;
    h.plan.fail_read = 1;
    DenseConfig cfg;
    cfg.odirect = odirect;
    cfg.wrap_file = h.hook();
    EXPECT_THAT(error_of([&] { DenseWeights dw(m, cfg, is_expert_tensor); }),
                AllOf(HasSubstr(files().single), HasSubstr("at offset"), HasSubstr("Input/output error")));
    EXPECT_FALSE(h.made->empty());
  }
}

TEST(DenseFaults, EarlyEndOfFileAtDenseLoadIsAnError) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  FaultHook h;
  h.plan.eof_at = 5000;  // the file "shrank" after its header was parsed
  DenseConfig cfg;
  cfg.odirect = false;
  cfg.wrap_file = h.hook();
  EXPECT_THAT(error_of([&] { DenseWeights dw(m, cfg, is_expert_tensor); }),
              AllOf(HasSubstr(files().single), HasSubstr("unexpected end of file")));
}

TEST(DenseFaults, ShortReadsAndEintrAtDenseLoadAreRetried) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  FaultHook h;
  h.plan.max_bytes_per_raw = 777;
  h.plan.eintr_every = 2;
  DenseConfig cfg;
  cfg.odirect = false;  // short reads would break O_DIRECT alignment
  cfg.wrap_file = h.hook();
  DenseWeights dw(m, cfg, is_expert_tensor);
  EXPECT_GT(h.injected_eintr(), 0u);
  for (const gguf::TensorInfo& t : m.tensors()) {
    if (is_expert_tensor(t)) continue;
    const std::vector<uint8_t> want = file_bytes(m, {t.split, t.offset, t.bytes});
    ASSERT_EQ(std::memcmp(want.data(), dw.data(t), t.bytes), 0) << t.name;
  }
}

TEST(DenseFaults, EndlessEintrAtDenseLoadEndsInAnError) {
  // Every raw attempt is interrupted: the retry is bounded, so the load fails
  // with the cause instead of spinning forever.
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  FaultHook h;
  h.plan.eintr_every = 1;
  DenseConfig cfg;
  cfg.odirect = false;
  cfg.wrap_file = h.hook();
  EXPECT_THAT(error_of([&] { DenseWeights dw(m, cfg, is_expert_tensor); }),
              AllOf(HasSubstr(files().single), HasSubstr("Interrupted system call")));
  // One read gives up after exactly kMaxInterrupts retries (+ the first attempt).
  EXPECT_EQ(h.made->front()->raw_attempts() % (io::kMaxInterrupts + 1), 0u);
}

TEST(WeightStore, EndlessEintrAtExpertReadEndsInAnError) {
  const gguf::GgufModel m = gguf::GgufModel::open(files().single);
  const auto layers = expert_layers(m);
  FaultHook h;
  h.plan.eintr_every = 1;
  ExpertStoreConfig cfg;
  cfg.odirect = false;
  cfg.wrap_file = h.hook();
  ExpertStore store(m, layers, cfg);
  auto b = store.fetch(1, std::vector<int>{3});
  EXPECT_THAT(error_of([&] {
                while (b.next_ready() != -1) {
                }
              }),
              AllOf(HasSubstr(files().single), HasSubstr("Interrupted system call"), HasSubstr("layer 1")));
}

// ---- Mapped dense weights and a file that shrinks ----

// A private copy of the single-file model, so tests may truncate it.
struct ScratchModel {
  explicit ScratchModel(const std::string& tag)
      : path((fs::current_path() / ("weight_store_scratch_" + std::to_string(::getpid()) + "_" + tag + ".gguf"))
                 .string()) {
    fs::copy_file(files().single, path, fs::copy_options::overwrite_existing);
  }
  ~ScratchModel() {
    std::error_code ec;
    fs::remove(path, ec);
  }
  std::string path;
};

TEST(DenseMapped, FileTruncatedBeforeMappingIsAnErrorNamingFileAndTensor) {
  for (DenseMode mode : {DenseMode::Mmap, DenseMode::Warm}) {
    SCOPED_TRACE(dense_mode_name(mode));
    ScratchModel f("before");
    const gguf::GgufModel m = gguf::GgufModel::open(f.path);  // parsed while whole
    fs::resize_file(f.path, m.require("output.weight").offset + 10);
    DenseConfig cfg;
    cfg.mode = mode;
    EXPECT_THAT(error_of([&] { DenseWeights dw(m, cfg, is_expert_tensor); }),
                AllOf(HasSubstr(f.path), HasSubstr("tensor output.weight"), HasSubstr("ends past end of file"),
                      HasSubstr("truncated")));
  }
}

TEST(DenseMappedDeathTest, FileTruncatedWhileMappedEndsWithAMessageNotSigbus) {
  // The finding: with --dense-weights mmap, a model truncated while the engine
  // runs killed it with a bare SIGBUS. Now the guard prints what happened and
  // exits with the CLI's error status. Runs in a forked child (death test).
  ScratchModel f("while");
  const std::string path = f.path;
  const auto touch_after_truncation = [path] {
    const gguf::GgufModel m = gguf::GgufModel::open(path);
    DenseConfig cfg;
    cfg.mode = DenseMode::Mmap;
    DenseWeights dw(m, cfg, is_expert_tensor);
    const gguf::TensorInfo& t = m.require("output.weight");
    fs::resize_file(path, 4096);  // far before output.weight
    fs::remove(path);             // the mapping keeps the (now short) file alive
    volatile uint8_t sink = static_cast<const uint8_t*>(dw.data(t))[t.bytes - 1];
    (void)sink;
    std::fprintf(stderr, "no fault\n");
    std::_Exit(0);
  };
  EXPECT_EXIT(touch_after_truncation(), ::testing::ExitedWithCode(io::kMappedFileExitCode),
              "model file .*weight_store_scratch_.*_while\\.gguf changed or was truncated while mapped");
}

TEST(DenseMappedDeathTest, SigbusOutsideModelMappingsStillKillsWithSigbus) {
  // The guard must not swallow unrelated faults: a truncated mapping that is
  // NOT a model mapping still dies of SIGBUS (after a guard was installed).
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan handles SIGBUS itself (reports and exits 1)";
#endif
  ScratchModel f("other");
  const std::string path = f.path;
  const auto fault_elsewhere = [path] {
    const gguf::GgufModel m = gguf::GgufModel::open(path);
    DenseConfig cfg;
    cfg.mode = DenseMode::Mmap;
    DenseWeights dw(m, cfg, is_expert_tensor);  // installs the handler, guards its mapping
    const std::string other = path + ".other";
    fs::copy_file(path, other, fs::copy_options::overwrite_existing);
    const int fd = ::open(other.c_str(), O_RDONLY);
    const size_t n = fs::file_size(other);
    const auto* p = static_cast<const uint8_t*>(::mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0));
    fs::resize_file(other, 0);
    fs::remove(other);
    volatile uint8_t sink = p[n - 1];
    (void)sink;
    std::_Exit(0);
  };
  EXPECT_EXIT(fault_elsewhere(), ::testing::KilledBySignal(SIGBUS), "");
}

TEST(WeightStore, DenseModeNames) {
  EXPECT_EQ(parse_dense_mode("anon"), DenseMode::Anon);
  EXPECT_EQ(parse_dense_mode("warm"), DenseMode::Warm);
  EXPECT_EQ(parse_dense_mode("mmap"), DenseMode::Mmap);
  EXPECT_STREQ(dense_mode_name(DenseMode::Warm), "warm");
  EXPECT_THAT(error_of([] { parse_dense_mode("ram"); }), AllOf(HasSubstr("--dense-weights"), HasSubstr("ram")));
}

}  // namespace
}  // namespace sluice::moe
