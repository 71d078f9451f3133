#include "model/state/state_io.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/quant.h"
#include "util/error.h"

namespace sluice::model {
namespace {

enum : uint8_t { kNone = 0, kKv = 1, kRecurrent = 2, kKvRing = 3, kBlocks = 4 };

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

// Converts n stored elements of `el` bytes (f32, or f16 bits) at p to F32 in dst.
void to_f32(const char* p, uint64_t n, uint64_t el, float* dst) {
  if (n == 0) return;
  if (el == 4) {
    std::memcpy(dst, p, n * 4);
    return;
  }
  // f16 -> f32 -> f16 is exact: store() writes back the same bits.
  kernels::dequantize_row(GgmlType::F16, p, dst, static_cast<int64_t>(n));
}

// A layer's completed-block rows: u8 4, u32 width, i32 count, count rows.
void read_blocks(Reader& r, int layer, KvRows& blocks, int count, std::vector<float>& buf) {
  if (r.get<uint8_t>("a block-rows mark") != kBlocks) mismatch(layer, "no compressed blocks in the file");
  const uint32_t width = r.get<uint32_t>("the block width");
  const int32_t n = r.get<int32_t>("the block count");
  if (width != static_cast<uint32_t>(blocks.k_dim()) || n != count)
    mismatch(layer, std::to_string(n) + " compressed blocks of " + std::to_string(width) + " values, this model's are " +
                        std::to_string(count) + " of " + std::to_string(blocks.k_dim()));
  const uint64_t el = kv_type_bytes(blocks.type());
  const char* p = r.take(static_cast<uint64_t>(n) * width * el, "compressed blocks");
  buf.resize(width);
  for (int b = 0; b < n; ++b) {
    to_f32(p + static_cast<uint64_t>(b) * width * el, width, el, buf.data());
    blocks.store(b, buf.data(), nullptr);
  }
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
  std::vector<float> k, v;
  for (int l = 0; l < st.n_layers(); ++l) {
    const uint8_t kind = r.get<uint8_t>("a layer kind");
    const LayerStateSpec& spec = st.spec(l);
    if (kind == kKv || kind == kKvRing) {
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
      // The first position the file holds rows for (a ring's oldest; 0 otherwise).
      const int32_t first = kind == kKvRing ? r.get<int32_t>("the ring's first position") : 0;
      if (first < 0 || first > n_past)
        mismatch(l, "ring from position " + std::to_string(first) + " of " + std::to_string(n_past));
      if (first > 0 && !rows.ring())
        mismatch(l, "a sliding-window ring from position " + std::to_string(first) +
                        " in the file; this model keeps every row of this layer (a larger --ubatch or a smaller -c "
                        "than the model that saved it)");
      // A ring restored here must hold what the next token reads: its window.
      if (first > std::max(0, n_past + 1 - spec.kv.window) && rows.ring())
        mismatch(l, "ring from position " + std::to_string(first) + " lacks the window of " +
                        std::to_string(spec.kv.window) + " before position " + std::to_string(n_past));
      const uint64_t el = kv_type_bytes(rows.type());
      const uint64_t held = static_cast<uint64_t>(n_past - first);
      const char* kp = r.take(held * kd * el, "KV keys");
      const char* vp = r.take(held * vd * el, "KV values");
      k.resize(kd);
      v.resize(vd);
      // A ring smaller than the file's keeps only the newest positions.
      for (int pos = std::max(first, rows.first_held()); pos < n_past; ++pos) {
        const uint64_t p = static_cast<uint64_t>(pos - first);
        to_f32(kp + p * kd * el, kd, el, k.data());
        to_f32(vp + p * vd * el, vd, el, v.data());
        rows.store(pos, k.data(), v.data());
      }
      if (KvRows* blocks = st.blocks(l)) read_blocks(r, l, *blocks, n_past / spec.blocks.ratio, k);
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

// The stored keys (or values) of row 0, as bytes: f32 or f16 bits.
const char* stored(const KvRows& rows, bool keys) {
  if (rows.type() == KvType::F32) return reinterpret_cast<const char*>(keys ? rows.k_f32(0) : rows.v_f32(0));
  return reinterpret_cast<const char*>(keys ? rows.k_f16(0) : rows.v_f16(0));
}

// Appends positions [first, end) of the rows at `base` (row r at r * dim
// elements), in position order: one run, or two where a ring wrapped.
void put_positions(std::string& out, const KvRows& rows, const char* base, int dim, int first, int end) {
  const uint64_t row_bytes = static_cast<uint64_t>(dim) * kv_type_bytes(rows.type());
  for (int pos = first; pos < end;) {
    const int r = rows.row(pos);
    const int run = std::min(end - pos, rows.capacity() - r);
    put_bytes(out, base + static_cast<uint64_t>(r) * row_bytes, static_cast<uint64_t>(run) * row_bytes);
    pos += run;
  }
}

}  // namespace

void write_state(const ModelState& st, std::string& out) {
  const int n_past = st.n_past();
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
      // A ring holds only its newest positions, [first_held, n_past), each in
      // row pos % capacity: written in position order after their first position.
      const int first = rows.ring() ? rows.first_held() : 0;
      put<uint8_t>(out, rows.ring() ? kKvRing : kKv);
      put<uint32_t>(out, static_cast<uint32_t>(rows.k_dim()));
      put<uint32_t>(out, static_cast<uint32_t>(rows.v_dim()));
      if (rows.ring()) put<int32_t>(out, first);
      put_positions(out, rows, stored(rows, true), rows.k_dim(), first, n_past);
      if (rows.v_dim() > 0) put_positions(out, rows, stored(rows, false), rows.v_dim(), first, n_past);
      if (const KvRows* blocks = st.blocks(l)) {
        const int n = n_past / spec.blocks.ratio;
        put<uint8_t>(out, kBlocks);
        put<uint32_t>(out, static_cast<uint32_t>(blocks->k_dim()));
        put<int32_t>(out, n);
        put_positions(out, *blocks, stored(*blocks, true), blocks->k_dim(), 0, n);
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
