// libFuzzer target for GGUF writing then reading (gguf/writer.h -> parse):
// the input drives a FuzzedDataProvider that builds metadata (every value
// type, nested arrays, any key bytes) and tensors (every ggml type, 1..4
// dimensions, data bytes from the input), with an alignment that may be
// invalid. Contract checked: the Writer either refuses with sluice::Error,
// or writes a file that gguf::parse accepts and that reads back equal: the
// same keys in order with the same types and values (general.alignment
// added when the alignment is not 32), the same tensors with their types,
// shapes, sizes, aligned offsets and data bytes.
//
// Files go to a per-process path under /dev/shm (or $TMPDIR, /tmp): the
// writer's temporary-file-and-rename protocol is part of what is tested.
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "io/file.h"
#include "util/error.h"
#include "util/ggml_type.h"

namespace {

using namespace sluice;
using gguf::Value;
using gguf::ValueType;

std::string scratch_path() {
  std::string dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "";
  if (dir.empty()) dir = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  return dir + "/sluice-gguf-roundtrip-" + std::to_string(::getpid()) + ".gguf";
}

// A value of type t whose fields hold exactly what the file can store.
Value make_value(FuzzedDataProvider& fdp, ValueType t, int depth) {
  Value v;
  v.type = t;
  switch (t) {
    case ValueType::UINT8:
      v.u = fdp.ConsumeIntegral<uint8_t>();
      break;
    case ValueType::UINT16:
      v.u = fdp.ConsumeIntegral<uint16_t>();
      break;
    case ValueType::UINT32:
      v.u = fdp.ConsumeIntegral<uint32_t>();
      break;
    case ValueType::UINT64:
      v.u = fdp.ConsumeIntegral<uint64_t>();
      break;
    case ValueType::BOOL:
      v.u = fdp.ConsumeBool();
      break;
    case ValueType::INT8:
      v.i = fdp.ConsumeIntegral<int8_t>();
      break;
    case ValueType::INT16:
      v.i = fdp.ConsumeIntegral<int16_t>();
      break;
    case ValueType::INT32:
      v.i = fdp.ConsumeIntegral<int32_t>();
      break;
    case ValueType::INT64:
      v.i = fdp.ConsumeIntegral<int64_t>();
      break;
    case ValueType::FLOAT32: {
      const uint32_t bits = fdp.ConsumeIntegral<uint32_t>();
      float f;
      std::memcpy(&f, &bits, 4);
      v.f = f;
      break;
    }
    case ValueType::FLOAT64: {
      const uint64_t bits = fdp.ConsumeIntegral<uint64_t>();
      std::memcpy(&v.f, &bits, 8);
      break;
    }
    case ValueType::STRING:
      v.s = fdp.ConsumeRandomLengthString(64);
      break;
    case ValueType::ARRAY: {
      v.elem_type =
          static_cast<ValueType>(fdp.ConsumeIntegralInRange<uint32_t>(0, depth < 2 ? 12 : 11));
      if (v.elem_type == ValueType::ARRAY && depth >= 2) v.elem_type = ValueType::STRING;
      const size_t n = fdp.ConsumeIntegralInRange<size_t>(0, 8);
      for (size_t k = 0; k < n; ++k) v.array.push_back(make_value(fdp, v.elem_type, depth + 1));
      break;
    }
  }
  return v;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool equal(const Value& a, const Value& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case ValueType::FLOAT32:
    case ValueType::FLOAT64:
      return same_bits(a.f, b.f) || (std::isnan(a.f) && std::isnan(b.f));
    case ValueType::STRING:
      return a.s == b.s;
    case ValueType::ARRAY:
      if (a.elem_type != b.elem_type || a.array.size() != b.array.size()) return false;
      for (size_t k = 0; k < a.array.size(); ++k)
        if (!equal(a.array[k], b.array[k])) return false;
      return true;
    case ValueType::INT8:
    case ValueType::INT16:
    case ValueType::INT32:
    case ValueType::INT64:
      return a.i == b.i;
    default:
      return a.u == b.u;
  }
}

struct Tensor {
  std::string name;
  GgmlType type;
  std::vector<uint64_t> ne;
  std::vector<uint8_t> data;
};

[[noreturn]] void mismatch(const char* what) {
  std::fprintf(stderr, "gguf round trip: %s differs\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  static const std::string path = scratch_path();
  const uint64_t alignment = fdp.ConsumeBool()
                                 ? uint64_t{1} << fdp.ConsumeIntegralInRange<int>(0, 23)
                                 : fdp.ConsumeIntegral<uint64_t>();
  std::vector<std::pair<std::string, Value>> kv;
  std::vector<Tensor> tensors;
  try {
    gguf::Writer w(path, alignment);
    for (size_t n = fdp.ConsumeIntegralInRange<size_t>(0, 6); n > 0; --n) {
      std::string key = fdp.ConsumeRandomLengthString(24);
      Value v =
          make_value(fdp, static_cast<ValueType>(fdp.ConsumeIntegralInRange<uint32_t>(0, 12)), 0);
      w.add_metadata(key, v);
      kv.emplace_back(std::move(key), std::move(v));
    }
    for (size_t n = fdp.ConsumeIntegralInRange<size_t>(0, 4); n > 0; --n) {
      Tensor t;
      t.name = fdp.ConsumeRandomLengthString(24);
      t.type = static_cast<GgmlType>(fdp.ConsumeIntegralInRange<uint32_t>(0, kGgmlTypeCount));
      const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(t.type));
      const uint64_t block = info ? info->block_elems : 1;
      // Small shapes (0 included: the writer must refuse it); ne[0] in whole blocks.
      t.ne.resize(fdp.ConsumeIntegralInRange<size_t>(1, 4));
      for (size_t d = 0; d < t.ne.size(); ++d)
        t.ne[d] = fdp.ConsumeIntegralInRange<uint64_t>(0, 3) * (d == 0 ? block : 1);
      w.add_tensor(t.name, t.type, t.ne);
      uint64_t blocks = t.ne[0] / block;
      for (size_t d = 1; d < t.ne.size(); ++d) blocks *= t.ne[d];
      t.data.resize(blocks * info->block_bytes);
      for (auto& b : t.data) b = fdp.ConsumeIntegral<uint8_t>();
      tensors.push_back(std::move(t));
    }
    w.write_header();
    for (const auto& t : tensors) w.write_tensor_data(t.data.data(), t.data.size());
    w.finish();
  } catch (const Error&) {
    return 0;  // refused: nothing to read back
  }

  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  gguf::ParsedFile f;
  try {
    f = gguf::parse(*io::memory_file(path, bytes));
  } catch (const Error& e) {
    std::fprintf(stderr, "the writer wrote a file the parser refuses: %s\n", e.what());
    std::abort();
  }
  if (f.alignment != alignment) mismatch("alignment");
  const auto& got = f.metadata.entries();
  size_t g = 0;
  if (alignment != 32 && !f.metadata.find("general.alignment"))
    mismatch("general.alignment presence");
  for (const auto& [k, v] : kv) {
    if (g < got.size() && got[g].first == "general.alignment" && k != "general.alignment") ++g;
    if (g >= got.size() || got[g].first != k || !equal(got[g].second, v)) mismatch("metadata");
    ++g;
  }
  if (g < got.size() && got[g].first == "general.alignment") ++g;
  if (g != got.size()) mismatch("metadata count");
  if (f.tensors.size() != tensors.size()) mismatch("tensor count");
  for (size_t k = 0; k < tensors.size(); ++k) {
    const auto& a = tensors[k];
    const auto& b = f.tensors[k];
    if (a.name != b.name || a.type != b.type || a.ne != b.ne || b.bytes != a.data.size())
      mismatch("tensor info");
    if (b.offset % alignment != 0 || b.offset < f.data_offset || b.offset + b.bytes > bytes.size())
      mismatch("tensor offset");
    if (!std::equal(a.data.begin(), a.data.end(),
                    bytes.begin() + static_cast<std::ptrdiff_t>(b.offset)))
      mismatch("tensor data");
  }
  return 0;
}
