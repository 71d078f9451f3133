#include "model/state/kv_rows.h"

#include <algorithm>
#include <cstring>

#include "kernels/quant.h"
#include "util/error.h"

namespace sluice::model {

int resolve_context(int requested, uint32_t n_ctx_train) {
  if (requested > 0) return requested;
  return static_cast<int>(std::min<uint32_t>(n_ctx_train, kDefaultContextCap));
}

KvType parse_kv_type(const std::string& s) {
  if (s == "f32" || s == "F32") return KvType::F32;
  if (s == "f16" || s == "F16") return KvType::F16;
  throw Error("--kv-type: expected f16 or f32, got '" + s + "'");
}

const char* kv_type_name(KvType t) { return t == KvType::F32 ? "f32" : "f16"; }

KvRows::KvRows(KvType type, int capacity, int k_dim, int v_dim, bool ring)
    : type_(type), capacity_(capacity), k_dim_(k_dim), v_dim_(v_dim), ring_(ring) {
  if (capacity <= 0) throw Error("context size must be > 0 (got " + std::to_string(capacity) + ")");
  const size_t nk = static_cast<size_t>(capacity) * k_dim;
  const size_t nv = static_cast<size_t>(capacity) * v_dim;
  if (type == KvType::F32) {
    k32_.resize(nk);
    v32_.resize(nv);
  } else {
    k16_.resize(nk);
    v16_.resize(nv);
  }
}

void KvRows::set_filled(int n) {
  if (n > capacity_ && !ring_)
    throw Error("context full: " + std::to_string(n) + " positions needed, context size is " +
                std::to_string(capacity_) + " (raise -c)");
  if (n > n_filled_) first_held_ = std::max(first_held_, n - capacity_);
  n_filled_ = n;
  first_held_ = std::min(first_held_, n_filled_);
}

void KvRows::truncate(int n) {
  if (n < 0 || n > n_filled_)
    throw Error("KV rows: truncate to " + std::to_string(n) + " but " + std::to_string(n_filled_) +
                " positions are held");
  n_filled_ = n;
  first_held_ = std::min(first_held_, n_filled_);
}

void KvRows::store(int pos, const float* k, const float* v) {
  if (pos < first_held_ || pos >= n_filled_)
    throw Error("KV rows: store out of range (pos " + std::to_string(pos) + ")");
  const size_t ki = static_cast<size_t>(row(pos)) * k_dim_, vi = static_cast<size_t>(row(pos)) * v_dim_;
  if (type_ == KvType::F32) {
    std::memcpy(&k32_[ki], k, sizeof(float) * k_dim_);
    if (v_dim_ > 0) std::memcpy(&v32_[vi], v, sizeof(float) * v_dim_);
  } else {
    // The F16 kernels (F16C where available) convert exactly as fp16.h does.
    kernels::quantize_row(GgmlType::F16, k, &k16_[ki], k_dim_);
    if (v_dim_ > 0) kernels::quantize_row(GgmlType::F16, v, &v16_[vi], v_dim_);
  }
}

void KvRows::load_k(int pos, float* dst) const {
  if (pos < first_held_ || pos >= n_filled_)
    throw Error("KV rows: read of unwritten position " + std::to_string(pos));
  const size_t ki = static_cast<size_t>(row(pos)) * k_dim_;
  if (type_ == KvType::F32) {
    std::memcpy(dst, &k32_[ki], sizeof(float) * k_dim_);
  } else {
    kernels::dequantize_row(GgmlType::F16, &k16_[ki], dst, k_dim_);
  }
}

void KvRows::load_v(int pos, float* dst) const {
  if (pos < first_held_ || pos >= n_filled_)
    throw Error("KV rows: read of unwritten position " + std::to_string(pos));
  const size_t vi = static_cast<size_t>(row(pos)) * v_dim_;
  if (type_ == KvType::F32) {
    std::memcpy(dst, &v32_[vi], sizeof(float) * v_dim_);
  } else {
    kernels::dequantize_row(GgmlType::F16, &v16_[vi], dst, v_dim_);
  }
}

const float* KvRows::k_f32(int r) const {
  return type_ == KvType::F32 ? k32_.data() + static_cast<size_t>(r) * k_dim_ : nullptr;
}
const float* KvRows::v_f32(int r) const {
  return type_ == KvType::F32 ? v32_.data() + static_cast<size_t>(r) * v_dim_ : nullptr;
}
const uint16_t* KvRows::k_f16(int r) const {
  return type_ == KvType::F16 ? k16_.data() + static_cast<size_t>(r) * k_dim_ : nullptr;
}
const uint16_t* KvRows::v_f16(int r) const {
  return type_ == KvType::F16 ? v16_.data() + static_cast<size_t>(r) * v_dim_ : nullptr;
}

uint64_t KvRows::bytes() const {
  return type_ == KvType::F32 ? (k32_.size() + v32_.size()) * 4ull : (k16_.size() + v16_.size()) * 2ull;
}

}  // namespace sluice::model
