// GGUF reading: metadata, tensor infos, and where each tensor's bytes live.
//
// Supports GGUF v2 and v3 (little-endian), every metadata value type including
// arrays of strings and nested arrays, `general.alignment`, and split models
// (NAME-00001-of-0000N.gguf read as one model, tensors located per split).
//
// Validation is total: any structural problem throws sluice::Error whose
// message names the file and the problem; nothing reads out of bounds. Checked:
// magic and version; counts against the file size; string/array lengths;
// dimension products without overflow; known tensor types; tensor data
// aligned, inside the file, non-overlapping; duplicate keys or tensor names.
//
// Thread-safety: a GgufModel is immutable after open; share it freely.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/file.h"
#include "util/ggml_type.h"

namespace sluice::gguf {

// Hash that lets unordered_map<std::string, ...> be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5,
  FLOAT32 = 6, BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);

// One metadata value. Scalars use the matching field; ARRAY uses elem_type and
// `array` (whose elements may themselves be arrays).
struct Value {
  ValueType type = ValueType::UINT8;
  uint64_t u = 0;      // UINT8..UINT64 and BOOL (0/1)
  int64_t i = 0;       // INT8..INT64
  double f = 0;        // FLOAT32, FLOAT64
  std::string s;       // STRING
  ValueType elem_type = ValueType::UINT8;  // ARRAY
  std::vector<Value> array;                // ARRAY

  static Value from_u32(uint32_t v);
  static Value from_u64(uint64_t v);
  static Value from_i32(int32_t v);
  static Value from_f32(float v);
  static Value from_bool(bool v);
  static Value from_string(std::string v);
  static Value from_strings(const std::vector<std::string>& v);
  static Value from_f32s(const std::vector<float>& v);
  static Value from_i32s(const std::vector<int32_t>& v);
};

class Metadata {
 public:
  // Typed accessors: nullopt when the key is absent; sluice::Error when present
  // with an incompatible type (message names the key, the file and both types).
  // Integer accessors accept any integer type whose value fits.
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;  // floats and integers
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;
  std::optional<std::vector<float>> get_float_array(std::string_view key) const;

  // Like get_* but throws sluice::Error("FILE: missing metadata key K").
  uint64_t require_uint(std::string_view key) const;
  double require_float(std::string_view key) const;
  std::string require_string(std::string_view key) const;

  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // All entries in file order.
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

  void add(std::string key, Value v);  // throws on a duplicate key
  void set_source(std::string name) { source_ = std::move(name); }
  const std::string& source() const { return source_; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> index_;  // key -> entries_ index
  std::string source_;  // file name used in error messages
};

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<uint64_t> ne;  // ggml order: ne[0] is the row length (fastest varying)
  uint32_t split = 0;        // index into GgufModel::paths()
  uint64_t offset = 0;       // absolute byte offset of the data in that file
  uint64_t bytes = 0;

  uint64_t n_elements() const;
  uint64_t row_bytes() const;  // bytes of one ne[0]-long row
  uint64_t n_rows() const;     // product of ne[1..]
};

struct ByteRange {
  uint32_t split = 0;
  uint64_t offset = 0;  // absolute in that file
  uint64_t bytes = 0;
};

// One parsed GGUF file (one split). Produced by parse(); mostly used through GgufModel.
struct ParsedFile {
  std::string path;
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // start of the tensor data section
  uint64_t file_size = 0;
  Metadata metadata;
  std::vector<TensorInfo> tensors;  // offsets already absolute
};

// PATH and, when its name is NAME-0000K-of-0000N.gguf, the names of the other
// splits GgufModel::open(PATH) would read (existing or not). Lets a command
// keep its outputs off every file of a model before opening it.
std::vector<std::string> model_file_paths(const std::string& path);

// Parses and validates one GGUF file through `file` (tensor offsets are checked
// against file.size()). Reads only the header, never tensor data.
ParsedFile parse(const io::File& file);

class GgufModel {
 public:
  // Opens PATH; if PATH is split (NAME-00001-of-00003.gguf, or the split.count
  // metadata says so), opens every split and merges tensors. Metadata is that
  // of the first split. Throws sluice::Error naming the file on any problem.
  // `wrap` (optional) wraps each opened split before its header is parsed.
  static GgufModel open(const std::string& path, const io::WrapFile& wrap = {});
  static GgufModel from_parsed(std::vector<ParsedFile> splits);  // tests

  const Metadata& metadata() const { return splits_.front().metadata; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(std::string_view name) const;
  const TensorInfo& require(std::string_view name) const;  // Error("FILE: missing tensor NAME")

  // Bytes of expert e of a stacked 3-D expert tensor (ne = {n_in, n_out, n_expert}).
  // Throws if t is not 3-D or e >= ne[2].
  ByteRange expert_range(const TensorInfo& t, uint64_t e) const;

  std::vector<std::string> paths() const;
  const ParsedFile& split(uint32_t i) const { return splits_.at(i); }
  uint32_t n_splits() const { return static_cast<uint32_t>(splits_.size()); }
  std::string architecture() const;  // general.architecture ("" if absent)

 private:
  std::vector<ParsedFile> splits_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> index_;  // name -> tensors_ index
};

}  // namespace sluice::gguf
