// Streamed GGUF v3 writer. Bytes go through one large user-space buffer
// (stdio's own buffering is disabled) so multi-GB files write at disk speed;
// chunks larger than the buffer bypass it.
#include "gguf/writer.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <unordered_set>

#include "io/output_file.h"
#include "util/error.h"

namespace sluice::gguf {
namespace {

constexpr size_t kWriteBufferBytes = 8u << 20;
constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;

}  // namespace

Writer::Writer(std::string path, uint64_t alignment)
    : path_(std::move(path)),
      alignment_(alignment),
      owned_(std::make_unique<io::OutputFile>(path_)),
      out_(owned_.get()) {
  check_alignment();
}

Writer::Writer(io::OutputFile& out, uint64_t alignment) : path_(out.path()), alignment_(alignment), out_(&out) {
  check_alignment();
}

void Writer::check_alignment() {
  if (alignment_ == 0 || !std::has_single_bit(alignment_))
    fail(path_, "GGUF alignment " + std::to_string(alignment_) + " is not a power of two");
  if (alignment_ > kMaxAlignment)
    fail(path_, "GGUF alignment " + std::to_string(alignment_) + " is over the limit of " +
                    std::to_string(kMaxAlignment) + " bytes");
  buffer_.reserve(kWriteBufferBytes);
}

// Not finished: an owned output's temporary file goes with owned_, so nobody
// mistakes a partial file for a complete model; a borrowed one is the caller's.
Writer::~Writer() = default;

void Writer::add_metadata(std::string key, Value v) {
  if (header_written_) fail(path_, "metadata key '" + key + "' added after the header was written");
  for (const auto& [k, _] : metadata_)
    if (k == key) fail(path_, "duplicate metadata key '" + key + "'");
  if (key == "general.alignment") {
    if (v.type == ValueType::ARRAY || v.type == ValueType::STRING || v.u != alignment_)
      fail(path_, "general.alignment metadata does not match the writer alignment " + std::to_string(alignment_));
  }
  if (v.type == ValueType::ARRAY) {
    // Every element must have the declared element type (recursively), because
    // GGUF stores the element type once per array.
    auto check = [&](auto&& self, const Value& a) -> void {
      for (const Value& e : a.array) {
        if (e.type != a.elem_type)
          fail(path_, "metadata key '" + key + "': array element of type " + std::string(value_type_name(e.type)) +
                          " in an array of " + std::string(value_type_name(a.elem_type)));
        if (e.type == ValueType::ARRAY) self(self, e);
      }
    };
    check(check, v);
  }
  metadata_.emplace_back(std::move(key), std::move(v));
}

void Writer::add_tensor(std::string name, GgmlType type, std::vector<uint64_t> ne) {
  if (header_written_) fail(path_, "tensor '" + name + "' added after the header was written");
  const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(type));
  if (!info) fail(path_, "tensor '" + name + "' has invalid type id " + std::to_string(static_cast<uint32_t>(type)));
  if (ne.empty() || ne.size() > 4) fail(path_, "tensor '" + name + "' must have 1..4 dimensions");
  for (uint64_t d : ne)
    if (d == 0) fail(path_, "tensor '" + name + "' has a zero dimension");
  if (ne[0] % info->block_elems != 0)
    fail(path_, "tensor '" + name + "' of type " + std::string(info->name) + " has row length " + std::to_string(ne[0]) +
                    ", not a multiple of the block size " + std::to_string(info->block_elems));
  for (const auto& t : tensors_)
    if (t.name == name) fail(path_, "duplicate tensor name '" + name + "'");
  uint64_t blocks = ne[0] / info->block_elems;
  for (size_t k = 1; k < ne.size(); ++k)
    if (__builtin_mul_overflow(blocks, ne[k], &blocks)) fail(path_, "tensor '" + name + "' is too large");
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(info->block_bytes), &bytes))
    fail(path_, "tensor '" + name + "' is too large");
  uint64_t offset = 0;
  if (!tensors_.empty()) {
    const Pending& prev = tensors_.back();
    offset = (prev.offset + prev.bytes + alignment_ - 1) / alignment_ * alignment_;
  }
  tensors_.push_back(Pending{std::move(name), type, std::move(ne), bytes, offset});
}

void Writer::put(const void* p, size_t n) {
  if (finished_) fail(path_, "write after finish()");
  if (buffer_.size() + n > kWriteBufferBytes && !buffer_.empty()) {
    out_->write(buffer_.data(), buffer_.size());
    buffer_.clear();
  }
  if (n >= kWriteBufferBytes) {
    out_->write(p, n);
  } else {
    const auto* c = static_cast<const char*>(p);
    buffer_.insert(buffer_.end(), c, c + n);
  }
  written_ += n;
}

void Writer::pad_to(uint64_t align) {
  static const char zeros[256] = {};
  uint64_t pad = (align - written_ % align) % align;
  while (pad > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(pad, sizeof zeros));
    put(zeros, chunk);
    pad -= chunk;
  }
}

void Writer::write_header() {
  if (header_written_) fail(path_, "write_header called twice");
  auto u32 = [&](uint32_t v) { put(&v, 4); };
  auto u64 = [&](uint64_t v) { put(&v, 8); };
  auto str = [&](const std::string& s) { u64(s.size()); put(s.data(), s.size()); };
  // Writes a value's payload (no type tag): arrays carry their element type once.
  auto payload = [&](auto&& self, const Value& v) -> void {
    switch (v.type) {
      case ValueType::UINT8: case ValueType::BOOL: { uint8_t x = static_cast<uint8_t>(v.u); put(&x, 1); break; }
      case ValueType::INT8: { int8_t x = static_cast<int8_t>(v.i); put(&x, 1); break; }
      case ValueType::UINT16: { uint16_t x = static_cast<uint16_t>(v.u); put(&x, 2); break; }
      case ValueType::INT16: { int16_t x = static_cast<int16_t>(v.i); put(&x, 2); break; }
      case ValueType::UINT32: { uint32_t x = static_cast<uint32_t>(v.u); put(&x, 4); break; }
      case ValueType::INT32: { int32_t x = static_cast<int32_t>(v.i); put(&x, 4); break; }
      case ValueType::UINT64: { put(&v.u, 8); break; }
      case ValueType::INT64: { put(&v.i, 8); break; }
      case ValueType::FLOAT32: { float x = static_cast<float>(v.f); put(&x, 4); break; }
      case ValueType::FLOAT64: { put(&v.f, 8); break; }
      case ValueType::STRING: str(v.s); break;
      case ValueType::ARRAY:
        u32(static_cast<uint32_t>(v.elem_type));
        u64(v.array.size());
        for (const Value& e : v.array) self(self, e);
        break;
    }
  };

  const bool add_alignment_key =
      alignment_ != kDefaultAlignment &&
      std::none_of(metadata_.begin(), metadata_.end(), [](const auto& kv) { return kv.first == "general.alignment"; });

  u32(0x46554747);  // "GGUF"
  u32(kVersion);
  u64(tensors_.size());
  u64(metadata_.size() + (add_alignment_key ? 1 : 0));
  if (add_alignment_key) {
    str("general.alignment");
    u32(static_cast<uint32_t>(ValueType::UINT32));
    u32(static_cast<uint32_t>(alignment_));
  }
  for (const auto& [key, v] : metadata_) {
    str(key);
    u32(static_cast<uint32_t>(v.type));
    payload(payload, v);
  }
  for (const Pending& t : tensors_) {
    str(t.name);
    u32(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) u64(d);
    u32(static_cast<uint32_t>(t.type));
    u64(t.offset);
  }
  pad_to(alignment_);
  data_start_ = written_;
  header_written_ = true;
}

void Writer::write_tensor_data(const void* data, size_t n) {
  if (!header_written_) fail(path_, "tensor data written before write_header");
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    if (current_ >= tensors_.size())
      fail(path_, "more tensor bytes written than the " + std::to_string(tensors_.size()) + " declared tensors hold");
    const Pending& t = tensors_[current_];
    if (current_written_ == 0) {
      pad_to(alignment_);
      if (written_ - data_start_ != t.offset)
        fail(path_, "internal: tensor '" + t.name + "' lands at data offset " + std::to_string(written_ - data_start_) +
                        ", header says " + std::to_string(t.offset));
    }
    const size_t take = static_cast<size_t>(std::min<uint64_t>(n, t.bytes - current_written_));
    put(p, take);
    p += take;
    n -= take;
    current_written_ += take;
    if (current_written_ == t.bytes) {
      ++current_;
      current_written_ = 0;
    }
  }
}

void Writer::zero_fill_remaining() {
  if (!header_written_) fail(path_, "tensor data written before write_header");
  if (finished_) fail(path_, "write after finish()");
  if (current_ >= tensors_.size()) return;
  const Pending& last = tensors_.back();
  const uint64_t end = (data_start_ + last.offset + last.bytes + alignment_ - 1) / alignment_ * alignment_;
  if (!buffer_.empty()) out_->write(buffer_.data(), buffer_.size());
  buffer_.clear();
  out_->extend_with_zeros(end - written_);
  written_ = end;
  current_ = tensors_.size();
  current_written_ = 0;
}

void Writer::finish() {
  if (finished_) fail(path_, "finish called twice");
  if (!header_written_) fail(path_, "finish called before write_header");
  if (current_ < tensors_.size())
    fail(path_, "tensor '" + tensors_[current_].name + "' incomplete: " + std::to_string(current_written_) + " of " +
                    std::to_string(tensors_[current_].bytes) + " bytes written");
  if (!tensors_.empty()) pad_to(alignment_);
  if (!buffer_.empty()) out_->write(buffer_.data(), buffer_.size());
  buffer_.clear();
  finished_ = true;
  if (owned_) owned_->commit();
}

}  // namespace sluice::gguf
