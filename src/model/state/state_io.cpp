#include "model/state/state_io.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "util/error.h"
#include "util/fp16.h"

namespace sluice::model {
namespace {

enum : uint8_t { kNone = 0, kKv = 1, kRecurrent = 2 };

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_bytes(std::string& out, const void* p, uint64_t n) { out.append(static_cast<const char*>(p), n); }

// Reads from the bytes with every size checked against what is left.
struct Reader {
  std::string_view in;
  size_t at = 0;
  const char* take(uint64_t n, const char* what) {
    if (n > in.size() - at)
      throw Error("slot state: cut short at " + std::string(what) + " (offset " + std::to_string(at) + ", " +
                  std::to_string(n) + " bytes needed, " + std::to_string(in.size() - at) + " left)");
    const char* p = in.data() + at;
    at += n;
    return p;
  }
  template <typename T>
  T get(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof v, what), sizeof v);
    return v;
  }
};

[[noreturn]] void mismatch(int layer, const std::string& what) {
  throw Error("slot state: layer " + std::to_string(layer) + ": " + what);
}

void read_into(ModelState& st, std::string_view in) {
  Reader r{in};
  const uint32_t n_layers = r.get<uint32_t>("the layer count");
  if (n_layers != static_cast<uint32_t>(st.n_layers()))
    throw Error("slot state: " + std::to_string(n_layers) + " layers, this model has " +
                std::to_string(st.n_layers()));
  const int32_t n_past = r.get<int32_t>("the position count");
  if (n_past < 0 || n_past > st.n_ctx())
    throw Error("slot state: " + std::to_string(n_past) + " positions, the context holds " +
                std::to_string(st.n_ctx()) + " (raise -c)");
  const uint32_t kv = r.get<uint32_t>("the KV type");
  st.reset();
  if (n_past > 0) st.begin_append(n_past);
  const auto np = static_cast<uint64_t>(n_past);
  std::vector<float> k, v;
  for (int l = 0; l < st.n_layers(); ++l) {
    const uint8_t kind = r.get<uint8_t>("a layer kind");
    const LayerStateSpec& spec = st.spec(l);
    if (kind == kKv) {
      if (spec.kind != StateKind::KvRows) mismatch(l, "KV rows in the file, another kind in this model");
      KvRows& rows = st.kv(l);
      const uint32_t kd = r.get<uint32_t>("k_dim"), vd = r.get<uint32_t>("v_dim");
      if (kd != static_cast<uint32_t>(rows.k_dim()) || vd != static_cast<uint32_t>(rows.v_dim()))
        mismatch(l, "k_dim/v_dim " + std::to_string(kd) + "/" + std::to_string(vd) + ", this model's are " +
                        std::to_string(rows.k_dim()) + "/" + std::to_string(rows.v_dim()));
      const uint32_t want_kv = rows.type() == KvType::F32 ? 0 : 1;
      if (kv != want_kv)
        throw Error(std::string("slot state: KV type ") + (kv == 0 ? "f32" : kv == 1 ? "f16" : "unknown") +
                    ", this model's is " + kv_type_name(rows.type()) + " (--kv-type)");
      const uint64_t el = kv_type_bytes(rows.type());
      const char* kp = r.take(np * kd * el, "KV keys");
      const char* vp = r.take(np * vd * el, "KV values");
      k.resize(kd);
      v.resize(vd);
      for (uint64_t p = 0; p < np; ++p) {
        if (el == 4) {
          std::memcpy(k.data(), kp + p * kd * 4, kd * 4);
          std::memcpy(v.data(), vp + p * vd * 4, vd * 4);
        } else {
          // f16 -> f32 -> f16 is exact: store() writes back the same bits.
          for (uint32_t i = 0; i < kd; ++i) {
            uint16_t h;
            std::memcpy(&h, kp + (p * kd + i) * 2, 2);
            k[i] = fp16_to_fp32(h);
          }
          for (uint32_t i = 0; i < vd; ++i) {
            uint16_t h;
            std::memcpy(&h, vp + (p * vd + i) * 2, 2);
            v[i] = fp16_to_fp32(h);
          }
        }
        rows.store(static_cast<int>(p), k.data(), v.data());
      }
    } else if (kind == kRecurrent) {
      if (spec.kind != StateKind::Recurrent) mismatch(l, "a recurrent state in the file, another kind in this model");
      RecurrentState& rec = st.recurrent(l);
      const uint64_t n = r.get<uint64_t>("the recurrent state's size");
      if (n != rec.spec().floats())
        mismatch(l, "a recurrent state of " + std::to_string(n) + " floats, this model's has " +
                        std::to_string(rec.spec().floats()));
      std::memcpy(rec.conv(), r.take(n * sizeof(float), "the recurrent state"), n * sizeof(float));
    } else if (kind == kNone) {
      if (spec.kind != StateKind::None) mismatch(l, "no state in the file, this model's layer keeps one");
    } else {
      mismatch(l, "unknown layer kind " + std::to_string(kind));
    }
  }
  if (r.at != in.size())
    throw Error("slot state: " + std::to_string(in.size() - r.at) + " bytes past the last layer");
  if (n_past > 0) st.commit_append();
  st.checkpoint();
}

}  // namespace

void write_state(const ModelState& st, std::string& out) {
  const int n_past = st.n_past();
  const auto np = static_cast<uint64_t>(n_past);
  put<uint32_t>(out, static_cast<uint32_t>(st.n_layers()));
  put<int32_t>(out, n_past);
  uint32_t kv = 0;
  for (int l = 0; l < st.n_layers(); ++l)
    if (st.spec(l).kind == StateKind::KvRows) kv = st.kv(l).type() == KvType::F32 ? 0 : 1;
  put<uint32_t>(out, kv);
  for (int l = 0; l < st.n_layers(); ++l) {
    const LayerStateSpec& spec = st.spec(l);
    if (spec.kind == StateKind::KvRows) {
      const KvRows& rows = st.kv(l);
      if (rows.n_filled() < n_past) throw Error("slot state: layer " + std::to_string(l) + " is behind n_past");
      put<uint8_t>(out, kKv);
      put<uint32_t>(out, static_cast<uint32_t>(rows.k_dim()));
      put<uint32_t>(out, static_cast<uint32_t>(rows.v_dim()));
      const uint64_t el = kv_type_bytes(rows.type());
      if (n_past == 0) continue;
      if (rows.type() == KvType::F32) {
        put_bytes(out, rows.k_f32(0), np * rows.k_dim() * el);
        if (rows.v_dim() > 0) put_bytes(out, rows.v_f32(0), np * rows.v_dim() * el);
      } else {
        put_bytes(out, rows.k_f16(0), np * rows.k_dim() * el);
        if (rows.v_dim() > 0) put_bytes(out, rows.v_f16(0), np * rows.v_dim() * el);
      }
    } else if (spec.kind == StateKind::Recurrent) {
      // ModelState has no const recurrent(); the values are only read here.
      const RecurrentState& rec = const_cast<ModelState&>(st).recurrent(l);
      put<uint8_t>(out, kRecurrent);
      put<uint64_t>(out, rec.spec().floats());
      put_bytes(out, rec.conv(), rec.spec().floats() * sizeof(float));
    } else {
      put<uint8_t>(out, kNone);
    }
  }
}

void read_state(ModelState& st, std::string_view in) {
  try {
    read_into(st, in);
  } catch (...) {
    st.reset();
    throw;
  }
}

}  // namespace sluice::model
