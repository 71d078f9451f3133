// Shared helpers for the model/golden/invariance tests: locating shared data,
// loading a model with a given config, and reading golden files.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model/model.h"
#include "test_support.h"

namespace sluice::test {

inline bool exists(const std::string& p) { return std::filesystem::exists(p); }

// Skips the current test (with the path) when shared/REL is absent.
#define REQUIRE_SHARED(rel) \
  if (!::sluice::test::exists(::sluice::test::shared_path(rel))) GTEST_SKIP() << ::sluice::test::shared_path(rel) << " not found"

// A config that matches the golden reference (F32 KV cache) and reads through
// the page cache by default so tests are cheap; callers override fields.
inline model::ModelConfig golden_config() {
  model::ModelConfig c;
  c.kv_type = model::KvType::F32;
  c.threads = 2;
  c.io_threads = 2;
  c.n_ctx = 512;
  return c;
}

inline std::unique_ptr<model::Model> load(const std::string& path, const model::ModelConfig& cfg) {
  auto g = std::make_shared<const gguf::GgufModel>(gguf::GgufModel::open(path));
  return model::load_model(g, cfg);
}

inline std::vector<float> read_f32_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(0, std::ios::end);
  const auto n = static_cast<size_t>(f.tellg());
  std::vector<float> v(n / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

// Writes GGUF `from` again at `to` with metadata `key` dropped (replacement:
// nullopt) or set (replaced, or added last); the tensor data copied, or zeros
// with zero_data.
inline void write_edited_gguf(const std::string& from, const std::string& to, const std::string& key,
                              const std::optional<gguf::Value>& replacement, bool zero_data) {
  const gguf::GgufModel g = gguf::GgufModel::open(from);
  gguf::Writer w(to);
  for (const auto& [k, v] : g.metadata().entries())
    if (k != key) w.add_metadata(k, v);
  if (replacement) w.add_metadata(key, *replacement);
  for (const gguf::TensorInfo& t : g.tensors()) w.add_tensor(t.name, t.type, t.ne);
  w.write_header();
  std::ifstream in(from, std::ios::binary);
  for (const gguf::TensorInfo& t : g.tensors()) {
    std::vector<char> data(t.bytes, 0);
    if (!zero_data) {
      in.seekg(static_cast<std::streamoff>(t.offset));
      in.read(data.data(), static_cast<std::streamsize>(data.size()));
      ASSERT_TRUE(in) << from << ": cannot read tensor " << t.name;
    }
    w.write_tensor_data(data.data(), data.size());
  }
  w.finish();
}

// All logits of `tokens` evaluated as one sequence from position 0.
inline std::vector<float> eval_all(model::Model& m, const std::vector<int32_t>& tokens) {
  m.reset();
  std::vector<float> out(tokens.size() * m.hparams().n_vocab);
  m.eval(tokens, 0, out.data());
  return out;
}

// Whether two logit vectors are the same bits (the engine's invariants are
// bit-identity, not closeness).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Appends the logits of `n` greedy one-token steps to `all`, starting from the
// logits `last` (one row) of the position before `pos`.
inline void append_greedy_steps(model::Model& m, std::vector<float>& all, std::vector<float> last, int pos, int n) {
  const size_t nv = m.hparams().n_vocab;
  for (int i = 0; i < n; ++i) {
    int32_t best = 0;
    for (size_t v = 1; v < nv; ++v)
      if (last[v] > last[best]) best = static_cast<int32_t>(v);
    const int32_t one[1] = {best};
    m.eval(one, pos++, last.data());
    all.insert(all.end(), last.begin(), last.end());
  }
}

// Every logit of a prompt evaluated in one batch (prefill, T > 1), then of
// `n` greedy decode steps (T == 1), concatenated.
inline std::vector<float> prefill_and_decode(model::Model& m, const std::vector<int32_t>& prompt, int n) {
  std::vector<float> all = eval_all(m, prompt);
  const size_t nv = m.hparams().n_vocab;
  std::vector<float> last(all.end() - static_cast<std::ptrdiff_t>(nv), all.end());
  append_greedy_steps(m, all, std::move(last), static_cast<int>(prompt.size()), n);
  return all;
}

// Greedy continuation: prompt in one batch, then one token per eval.
inline std::vector<int32_t> greedy(model::Model& m, const std::vector<int32_t>& prompt, int n) {
  m.reset();
  const size_t nv = m.hparams().n_vocab;
  std::vector<float> logits(nv);
  m.eval_last(prompt, 0, logits.data());
  std::vector<int32_t> out;
  int pos = static_cast<int>(prompt.size());
  for (int i = 0; i < n; ++i) {
    int32_t best = 0;
    for (size_t v = 1; v < nv; ++v)
      if (logits[v] > logits[best]) best = static_cast<int32_t>(v);
    out.push_back(best);
    if (i + 1 == n) break;
    const int32_t one[1] = {best};
    m.eval_last(one, pos++, logits.data());
  }
  return out;
}

}  // namespace sluice::test
