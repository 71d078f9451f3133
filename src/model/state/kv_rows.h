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
//
// A ring (a sliding-window layer whose capacity is less than the context)
// keeps position p in row p % capacity: only the newest `capacity` positions
// are held, [first_held(), n_filled). Reads below first_held() are refused
// like reads of unwritten rows; the owner (ModelState) decides whether a
// truncate can still be exact (the window's rows are held) or must recompute.
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
  // ring: positions may pass the capacity (see above).
  KvRows(KvType type, int capacity, int k_dim, int v_dim, bool ring = false);

  KvType type() const { return type_; }
  int capacity() const { return capacity_; }
  int k_dim() const { return k_dim_; }
  int v_dim() const { return v_dim_; }
  bool ring() const { return ring_; }
  // The row position `pos` lives in (pos itself unless a ring wrapped).
  int row(int pos) const { return ring_ ? pos % capacity_ : pos; }
  // The oldest position still held (0 unless a ring overwrote older ones).
  int first_held() const { return first_held_; }
  // Positions [0, n_filled) hold valid rows (or are being written by the
  // current append, see set_filled).
  int n_filled() const { return n_filled_; }
  // Declares that positions [0, n) are valid or being written now; n may only
  // grow by an append of new rows or shrink (truncate). Error when n >
  // capacity (context full), except for a ring, where growing forgets the
  // positions below n - capacity (their rows are about to be overwritten).
  void set_filled(int n);
  // Rollback: forgets rows [n, n_filled). Error for n outside [0, n_filled].
  // A ring keeps only what it held: first_held() does not go back.
  void truncate(int n);
  void reset() { n_filled_ = first_held_ = 0; }

  void store(int pos, const float* k, const float* v);
  // Copies the key/value at `pos` into dst as F32 (k_dim / v_dim floats).
  void load_k(int pos, float* dst) const;
  void load_v(int pos, float* dst) const;
  // Direct access to the stored rows by row index (row(pos) holds position
  // pos; row r + 1 follows at k_dim / v_dim elements, up to row capacity - 1):
  // F32 for type F32, F16 bits for type F16, nullptr for the other type.
  // Unchecked: the caller keeps r < capacity and reads held positions only.
  const float* k_f32(int r) const;
  const float* v_f32(int r) const;
  const uint16_t* k_f16(int r) const;
  const uint16_t* v_f16(int r) const;

  // Bytes allocated for the rows: capacity * (k_dim + v_dim) * element size.
  uint64_t bytes() const;

 private:
  KvType type_;
  int capacity_, k_dim_, v_dim_;
  bool ring_;
  int n_filled_ = 0;
  int first_held_ = 0;
  std::vector<float> k32_, v32_;
  std::vector<uint16_t> k16_, v16_;
};

}  // namespace sluice::model
