// One attention layer's key/value rows, indexed by position.
//
// Layout: `capacity` rows of k_dim keys and `capacity` rows of v_dim values
// (v_dim 0: no values stored, as for MLA, whose values are part of the key
// row), stored as F32 or F16 (F16 halves memory; the golden tests use F32 to
// match the reference exactly). Positions are written in order; a read of a
// position that was never written since the last truncate is refused, so no
// uninitialised memory is ever used.
//
// Rollback is exact: truncate(n) forgets rows [n, n_filled) and nothing else
// (a row depends only on its own position's input).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::model {

// The context a model is loaded with for -c `requested`: requested when > 0,
// else min(n_ctx_train, kDefaultContextCap). The one rule for run, chat,
// serve, eval and inspect's state sizing.
inline constexpr int kDefaultContextCap = 4096;
int resolve_context(int requested, uint32_t n_ctx_train);

enum class KvType { F32, F16 };
KvType parse_kv_type(const std::string& s);  // "f32" | "f16", Error naming --kv-type otherwise
const char* kv_type_name(KvType t);
inline uint64_t kv_type_bytes(KvType t) { return t == KvType::F32 ? 4 : 2; }

class KvRows {
 public:
  // Allocates capacity x (k_dim + v_dim) values. Error for capacity <= 0.
  KvRows(KvType type, int capacity, int k_dim, int v_dim);

  KvType type() const { return type_; }
  int capacity() const { return capacity_; }
  int k_dim() const { return k_dim_; }
  int v_dim() const { return v_dim_; }
  // Positions [0, n_filled) hold valid rows (or are being written by the
  // current append, see set_filled).
  int n_filled() const { return n_filled_; }
  // Declares that positions [0, n) are valid or being written now; n may only
  // grow by an append of new rows or shrink (truncate). Error when n >
  // capacity (context full).
  void set_filled(int n);
  // Exact rollback: forgets rows [n, n_filled). Error for n outside [0, n_filled].
  void truncate(int n);
  void reset() { n_filled_ = 0; }

  void store(int pos, const float* k, const float* v);
  // Copies the key/value at `pos` into dst as F32 (k_dim / v_dim floats).
  void load_k(int pos, float* dst) const;
  void load_v(int pos, float* dst) const;
  // Direct access to the stored rows (row pos + 1 follows at k_dim / v_dim
  // elements): F32 for type F32, F16 bits for type F16, nullptr for the other
  // type. Unchecked: the caller keeps pos < n_filled().
  const float* k_f32(int pos) const;
  const float* v_f32(int pos) const;
  const uint16_t* k_f16(int pos) const;
  const uint16_t* v_f16(int pos) const;

  // Bytes allocated for the rows: capacity * (k_dim + v_dim) * element size.
  uint64_t bytes() const;

 private:
  KvType type_;
  int capacity_, k_dim_, v_dim_;
  int n_filled_ = 0;
  std::vector<float> k32_, v32_;
  std::vector<uint16_t> k16_, v16_;
};

}  // namespace sluice::model
