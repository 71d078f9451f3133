// Per-layer key/value cache for causal attention.
//
// Layout: for each layer, n_ctx rows of k_dim keys and n_ctx rows of v_dim
// values (v_dim 0: no values stored, as for MLA, whose values are part of the key row), stored as F32 or F16 (F16 halves memory; the golden tests use F32
// to match the reference exactly). Positions are written in order; a read of
// a position that was never written since reset() is refused, so no
// uninitialised memory is ever used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::model {

// The context a model is loaded with for -c `requested`: requested when > 0,
// else min(n_ctx_train, kDefaultContextCap). The one rule for run, chat,
// serve, eval and inspect's KV sizing.
inline constexpr int kDefaultContextCap = 4096;
int resolve_context(int requested, uint32_t n_ctx_train);

enum class KvType { F32, F16 };
KvType parse_kv_type(const std::string& s);  // "f32" | "f16", Error naming --kv-type otherwise
const char* kv_type_name(KvType t);

class KvCache {
 public:
  KvCache(KvType type, int n_layer, int n_ctx, int k_dim, int v_dim);

  KvType type() const { return type_; }
  int n_ctx() const { return n_ctx_; }
  // Positions [0, n_filled) hold valid entries in every layer written so far.
  int n_filled() const { return n_filled_; }
  void reset() { n_filled_ = 0; }
  // Declares that positions [0, n) are being (re)written by the current eval.
  // Throws Error if n > n_ctx (context full).
  void set_filled(int n);

  void store(int layer, int pos, const float* k, const float* v);
  // Copies the key/value at `pos` into dst as F32 (k_dim / v_dim floats).
  void load_k(int layer, int pos, float* dst) const;
  void load_v(int layer, int pos, float* dst) const;
  // Direct access to the stored rows (row pos + 1 follows at k_dim / v_dim
  // elements): F32 for type F32, F16 bits for type F16, nullptr for the other
  // type. Unchecked: the caller keeps pos < n_filled().
  const float* k_f32(int layer, int pos) const;
  const float* v_f32(int layer, int pos) const;
  const uint16_t* k_f16(int layer, int pos) const;
  const uint16_t* v_f16(int layer, int pos) const;

  uint64_t bytes() const;

 private:
  size_t k_index(int layer, int pos) const;
  size_t v_index(int layer, int pos) const;

  KvType type_;
  int n_layer_, n_ctx_, k_dim_, v_dim_;
  int n_filled_ = 0;
  std::vector<float> k32_, v32_;
  std::vector<uint16_t> k16_, v16_;
};

}  // namespace sluice::model
