// GGUF header parser: reads metadata and tensor infos through io::File with a
// buffered cursor and validates everything before trusting it.
//
// Rule: a count or length read from the file is checked against the bytes that
// remain before anything is allocated from it, so a corrupt header can cost at
// most memory proportional to the file size (never an untrusted count).
#include <algorithm>
#include <bit>
#include <cstring>
#include <unordered_set>

#include "gguf/gguf.h"
#include "util/error.h"

static_assert(std::endian::native == std::endian::little, "the GGUF parser assumes a little-endian host");

namespace sluice::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxArrayDepth = 8;        // nested arrays deeper than this are refused
constexpr uint32_t kMaxDims = 4;
constexpr size_t kReadBufferBytes = 1 << 20;

// Smallest encoded sizes, used to bound counts before allocating.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // key length, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name length, n_dims, one ne, type, offset

// Sequential reader over a File, refilled in large chunks. Every read is
// bounds-checked against the file size and reports the offset on failure.
class Cursor {
 public:
  // The buffer never exceeds the file, so small files cost a small allocation.
  explicit Cursor(const io::File& file)
      : file_(file), size_(file.size()), buffer_(std::min<uint64_t>(kReadBufferBytes, size_)) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }
  const std::string& path() const { return file_.path(); }
  void set_context(std::string what) { context_ = std::move(what); }
  const std::string& context() const { return context_; }

  void read(void* dst, uint64_t n) {
    if (n > remaining())
      fail(path(), "truncated: " + context_ + " needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
                       " but the file is " + std::to_string(size_) + " bytes");
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      if (pos_ == buf_start_ + buf_len_) refill();
      const uint64_t take = std::min<uint64_t>(n, buf_start_ + buf_len_ - pos_);
      std::memcpy(out, buffer_.data() + (pos_ - buf_start_), take);
      out += take;
      pos_ += take;
      n -= take;
    }
  }

  template <typename T>
  T get() {
    T v;
    read(&v, sizeof v);
    return v;
  }

  std::string string() {
    const uint64_t start = pos_;
    const uint64_t len = get<uint64_t>();
    if (len > remaining())
      fail(path(), context_ + ": string length " + std::to_string(len) + " at offset " + std::to_string(start) +
                       " runs past the end of the file (" + std::to_string(remaining()) + " bytes left)");
    std::string s(len, '\0');
    read(s.data(), len);
    return s;
  }

 private:
  void refill() {
    buf_start_ = pos_;
    buf_len_ = std::min<uint64_t>(buffer_.size(), size_ - pos_);
    file_.read_exact(buffer_.data(), buf_len_, buf_start_);
  }

  const io::File& file_;
  uint64_t size_;
  std::vector<uint8_t> buffer_;
  uint64_t buf_start_ = 0;
  uint64_t buf_len_ = 0;
  uint64_t pos_ = 0;
  std::string context_ = "header";
};

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::FLOAT64); }

// Encoded size of the smallest value of type t (arrays: empty array).
uint64_t min_value_bytes(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: return 8;
    case ValueType::ARRAY: return 4 + 8;
  }
  return 1;
}

Value read_value(Cursor& c, ValueType type, int depth);

Value read_array(Cursor& c, int depth) {
  Value v;
  v.type = ValueType::ARRAY;
  const uint64_t at = c.pos();
  const uint32_t elem = c.get<uint32_t>();
  if (!valid_value_type(elem))
    fail(c.path(), c.context() + ": array at offset " + std::to_string(at) + " has unknown element type " + std::to_string(elem));
  v.elem_type = static_cast<ValueType>(elem);
  if (v.elem_type == ValueType::ARRAY && depth + 1 >= kMaxArrayDepth)
    fail(c.path(), c.context() + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
  const uint64_t count = c.get<uint64_t>();
  if (count > c.remaining() / min_value_bytes(v.elem_type))
    fail(c.path(), c.context() + ": array of " + std::to_string(count) + " " + std::string(value_type_name(v.elem_type)) +
                       " elements at offset " + std::to_string(at) + " cannot fit in the " + std::to_string(c.remaining()) +
                       " bytes left in the file");
  v.array.reserve(count);
  for (uint64_t k = 0; k < count; ++k) v.array.push_back(read_value(c, v.elem_type, depth + 1));
  return v;
}

Value read_value(Cursor& c, ValueType type, int depth) {
  Value v;
  v.type = type;
  switch (type) {
    case ValueType::UINT8: v.u = c.get<uint8_t>(); break;
    case ValueType::INT8: v.i = c.get<int8_t>(); break;
    case ValueType::UINT16: v.u = c.get<uint16_t>(); break;
    case ValueType::INT16: v.i = c.get<int16_t>(); break;
    case ValueType::UINT32: v.u = c.get<uint32_t>(); break;
    case ValueType::INT32: v.i = c.get<int32_t>(); break;
    case ValueType::UINT64: v.u = c.get<uint64_t>(); break;
    case ValueType::INT64: v.i = c.get<int64_t>(); break;
    case ValueType::FLOAT32: v.f = c.get<float>(); break;
    case ValueType::FLOAT64: v.f = c.get<double>(); break;
    case ValueType::BOOL: {
      const uint64_t at = c.pos();
      const uint8_t b = c.get<uint8_t>();
      if (b > 1) fail(c.path(), c.context() + ": bool at offset " + std::to_string(at) + " has value " + std::to_string(b) + " (not 0 or 1)");
      v.u = b;
      break;
    }
    case ValueType::STRING: v.s = c.string(); break;
    case ValueType::ARRAY: return read_array(c, depth);
  }
  return v;
}

// Product of dims with overflow detection; also keeps the count within int64
// because ggml and every consumer index elements with signed 64-bit numbers.
bool checked_product(const std::vector<uint64_t>& ne, size_t from, uint64_t& out) {
  uint64_t p = 1;
  for (size_t k = from; k < ne.size(); ++k)
    if (__builtin_mul_overflow(p, ne[k], &p)) return false;
  if (p > static_cast<uint64_t>(INT64_MAX)) return false;
  out = p;
  return true;
}

std::string shape_text(const std::vector<uint64_t>& ne) {
  std::string s = "[";
  for (size_t k = 0; k < ne.size(); ++k) s += (k ? ", " : "") + std::to_string(ne[k]);
  return s + "]";
}

TensorInfo read_tensor_info(Cursor& c) {
  TensorInfo t;
  t.name = c.string();
  c.set_context("tensor '" + t.name + "'");
  const std::string& where = c.path();
  const std::string what = "tensor '" + t.name + "'";
  const uint32_t n_dims = c.get<uint32_t>();
  if (n_dims == 0 || n_dims > kMaxDims)
    fail(where, what + " has " + std::to_string(n_dims) + " dimensions (must be 1.." + std::to_string(kMaxDims) + ")");
  t.ne.resize(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) t.ne[d] = c.get<uint64_t>();
  const uint32_t type_id = c.get<uint32_t>();
  const uint64_t rel_offset = c.get<uint64_t>();
  t.offset = rel_offset;  // made absolute once the data section start is known

  for (uint32_t d = 0; d < n_dims; ++d)
    if (t.ne[d] == 0) fail(where, what + " has a zero dimension " + shape_text(t.ne));
  uint64_t n_elements = 0;
  if (!checked_product(t.ne, 0, n_elements))
    fail(where, what + " has dimensions " + shape_text(t.ne) + " whose product overflows");

  const GgmlTypeInfo* info = ggml_type_info(type_id);
  if (!info) fail(where, what + " has unknown type " + std::to_string(type_id) + " (" + ggml_type_id_name(type_id) + ")");
  t.type = info->type;
  if (t.ne[0] % info->block_elems != 0)
    fail(where, what + " of type " + std::string(info->name) + " has row length " + std::to_string(t.ne[0]) +
                    ", not a multiple of the block size " + std::to_string(info->block_elems));
  const uint64_t n_blocks = n_elements / info->block_elems;
  if (__builtin_mul_overflow(n_blocks, static_cast<uint64_t>(info->block_bytes), &t.bytes))
    fail(where, what + " byte size overflows for dimensions " + shape_text(t.ne));
  return t;
}

}  // namespace

ParsedFile parse(const io::File& file) {
  ParsedFile pf;
  pf.path = file.path();
  pf.file_size = file.size();
  pf.metadata.set_source(pf.path);
  const std::string& where = pf.path;
  Cursor c(file);

  if (pf.file_size < 4) fail(where, "not a GGUF file: only " + std::to_string(pf.file_size) + " bytes");
  c.set_context("GGUF header");
  const uint32_t magic = c.get<uint32_t>();
  if (magic != kMagic) fail(where, "not a GGUF file (bad magic; expected \"GGUF\")");
  pf.version = c.get<uint32_t>();
  if (pf.version == 1)
    fail(where, "GGUF version 1 is not supported (it predates 64-bit counts); re-convert the model to GGUF v3");
  if (pf.version != 2 && pf.version != 3)
    fail(where, "unsupported GGUF version " + std::to_string(pf.version) + " (supported: 2 and 3)");
  const uint64_t n_tensors = c.get<uint64_t>();
  const uint64_t n_kv = c.get<uint64_t>();
  if (n_kv > c.remaining() / kMinKvBytes)
    fail(where, "corrupt header: " + std::to_string(n_kv) + " metadata entries cannot fit in a " + std::to_string(pf.file_size) +
                    "-byte file");
  if (n_tensors > c.remaining() / kMinTensorInfoBytes)
    fail(where, "corrupt header: " + std::to_string(n_tensors) + " tensors cannot fit in a " + std::to_string(pf.file_size) +
                    "-byte file");

  for (uint64_t k = 0; k < n_kv; ++k) {
    c.set_context("metadata entry #" + std::to_string(k));
    std::string key = c.string();
    c.set_context("metadata key '" + key + "'");
    const uint64_t at = c.pos();
    const uint32_t type = c.get<uint32_t>();
    if (!valid_value_type(type))
      fail(where, "metadata key '" + key + "' has unknown value type " + std::to_string(type) + " at offset " + std::to_string(at));
    Value v = read_value(c, static_cast<ValueType>(type), 0);
    pf.metadata.add(std::move(key), std::move(v));
  }

  if (pf.metadata.has("general.alignment")) {
    const uint64_t a = pf.metadata.require_uint("general.alignment");
    if (a == 0 || !std::has_single_bit(a))
      fail(where, "general.alignment is " + std::to_string(a) + ", which is not a power of two");
    pf.alignment = a;
  }

  // Tensor infos: re-check the count against what is left now that metadata is read.
  if (n_tensors > c.remaining() / kMinTensorInfoBytes)
    fail(where, "corrupt header: " + std::to_string(n_tensors) + " tensor infos cannot fit in the " + std::to_string(c.remaining()) +
                    " bytes after the metadata");
  pf.tensors.reserve(n_tensors);
  std::unordered_set<std::string_view> names;
  names.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    c.set_context("tensor info #" + std::to_string(k));
    pf.tensors.push_back(read_tensor_info(c));
  }
  for (const TensorInfo& t : pf.tensors)
    if (!names.insert(t.name).second) fail(where, "duplicate tensor name '" + t.name + "'");

  // Data section: header end rounded up to the alignment.
  const uint64_t header_end = c.pos();
  const uint64_t misalign = header_end % pf.alignment;
  pf.data_offset = header_end + (misalign ? pf.alignment - misalign : 0);
  if (pf.data_offset < header_end)
    fail(where, "data section offset overflows");
  if (!pf.tensors.empty() && pf.data_offset > pf.file_size)
    fail(where, "truncated: the tensor data section would start at offset " + std::to_string(pf.data_offset) +
                    " but the file is " + std::to_string(pf.file_size) + " bytes");

  for (TensorInfo& t : pf.tensors) {
    const std::string what = "tensor '" + t.name + "'";
    if (t.offset % pf.alignment != 0)
      fail(where, what + " data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                      std::to_string(pf.alignment));
    uint64_t abs = 0, end = 0;
    if (__builtin_add_overflow(pf.data_offset, t.offset, &abs) || __builtin_add_overflow(abs, t.bytes, &end) ||
        end > pf.file_size)
      fail(where, what + " data (" + std::to_string(t.bytes) + " bytes at data offset " + std::to_string(t.offset) +
                      ") extends beyond the end of the file (" + std::to_string(pf.file_size) + " bytes)");
    t.offset = abs;
  }

  // Overlap check on tensors sorted by offset.
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(pf.tensors.size());
  for (const TensorInfo& t : pf.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const TensorInfo& prev = *by_offset[k - 1];
    const TensorInfo& cur = *by_offset[k];
    if (prev.offset + prev.bytes > cur.offset)
      fail(where, "tensors '" + prev.name + "' and '" + cur.name + "' overlap (bytes " + std::to_string(prev.offset) + ".." +
                      std::to_string(prev.offset + prev.bytes) + " and " + std::to_string(cur.offset) + ".." +
                      std::to_string(cur.offset + cur.bytes) + ")");
  }
  return pf;
}

}  // namespace sluice::gguf
