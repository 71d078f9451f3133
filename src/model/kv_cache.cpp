#include "model/kv_cache.h"

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

KvCache::KvCache(KvType type, int n_layer, int n_ctx, int k_dim, int v_dim)
    : type_(type), n_layer_(n_layer), n_ctx_(n_ctx), k_dim_(k_dim), v_dim_(v_dim) {
  if (n_ctx <= 0) throw Error("context size must be > 0 (got " + std::to_string(n_ctx) + ")");
  const size_t nk = static_cast<size_t>(n_layer) * n_ctx * k_dim;
  const size_t nv = static_cast<size_t>(n_layer) * n_ctx * v_dim;
  if (type == KvType::F32) {
    k32_.resize(nk);
    v32_.resize(nv);
  } else {
    k16_.resize(nk);
    v16_.resize(nv);
  }
}

void KvCache::set_filled(int n) {
  if (n > n_ctx_)
    throw Error("context full: " + std::to_string(n) + " positions needed, context size is " +
                std::to_string(n_ctx_) + " (raise -c)");
  n_filled_ = n;
}

size_t KvCache::k_index(int layer, int pos) const {
  return (static_cast<size_t>(layer) * n_ctx_ + pos) * k_dim_;
}
size_t KvCache::v_index(int layer, int pos) const {
  return (static_cast<size_t>(layer) * n_ctx_ + pos) * v_dim_;
}

void KvCache::store(int layer, int pos, const float* k, const float* v) {
  if (layer < 0 || layer >= n_layer_ || pos < 0 || pos >= n_filled_)
    throw Error("KV cache: store out of range (layer " + std::to_string(layer) + ", pos " + std::to_string(pos) + ")");
  if (type_ == KvType::F32) {
    std::memcpy(&k32_[k_index(layer, pos)], k, sizeof(float) * k_dim_);
    if (v_dim_ > 0) std::memcpy(&v32_[v_index(layer, pos)], v, sizeof(float) * v_dim_);
  } else {
    // The F16 kernels (F16C where available) convert exactly as fp16.h does.
    kernels::quantize_row(GgmlType::F16, k, &k16_[k_index(layer, pos)], k_dim_);
    if (v_dim_ > 0) kernels::quantize_row(GgmlType::F16, v, &v16_[v_index(layer, pos)], v_dim_);
  }
}

void KvCache::load_k(int layer, int pos, float* dst) const {
  if (pos < 0 || pos >= n_filled_) throw Error("KV cache: read of unwritten position " + std::to_string(pos));
  if (type_ == KvType::F32) {
    std::memcpy(dst, &k32_[k_index(layer, pos)], sizeof(float) * k_dim_);
  } else {
    kernels::dequantize_row(GgmlType::F16, &k16_[k_index(layer, pos)], dst, k_dim_);
  }
}

void KvCache::load_v(int layer, int pos, float* dst) const {
  if (pos < 0 || pos >= n_filled_) throw Error("KV cache: read of unwritten position " + std::to_string(pos));
  if (type_ == KvType::F32) {
    std::memcpy(dst, &v32_[v_index(layer, pos)], sizeof(float) * v_dim_);
  } else {
    kernels::dequantize_row(GgmlType::F16, &v16_[v_index(layer, pos)], dst, v_dim_);
  }
}

const float* KvCache::k_f32(int layer, int pos) const {
  return type_ == KvType::F32 ? &k32_[k_index(layer, pos)] : nullptr;
}
const float* KvCache::v_f32(int layer, int pos) const {
  return type_ == KvType::F32 ? &v32_[v_index(layer, pos)] : nullptr;
}

const uint16_t* KvCache::k_f16(int layer, int pos) const {
  return type_ == KvType::F16 ? &k16_[k_index(layer, pos)] : nullptr;
}
const uint16_t* KvCache::v_f16(int layer, int pos) const {
  return type_ == KvType::F16 ? &v16_[v_index(layer, pos)] : nullptr;
}

uint64_t KvCache::bytes() const {
  return type_ == KvType::F32 ? (k32_.size() + v32_.size()) * 4ull : (k16_.size() + v16_.size()) * 2ull;
}

}  // namespace sluice::model
