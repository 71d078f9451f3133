// GGUF metadata values and the typed accessors over them.
#include <limits>

#include "gguf/gguf.h"
#include "util/error.h"

namespace sluice::gguf {
namespace {

bool is_unsigned(ValueType t) {
  return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 || t == ValueType::UINT64;
}
bool is_signed(ValueType t) {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
}
bool is_float(ValueType t) { return t == ValueType::FLOAT32 || t == ValueType::FLOAT64; }

std::string describe(const Value& v) {
  if (v.type != ValueType::ARRAY) return std::string(value_type_name(v.type));
  return "array of " + std::string(value_type_name(v.elem_type));
}

// Integer value of v if it is an integer type and fits in T; otherwise nullopt.
template <typename T>
std::optional<T> integer_as(const Value& v) {
  if (is_unsigned(v.type)) {
    if (v.u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
    return static_cast<T>(v.u);
  }
  if (is_signed(v.type)) {
    if (v.i < 0 && !std::numeric_limits<T>::is_signed) return std::nullopt;
    if (v.i >= 0 && static_cast<uint64_t>(v.i) > static_cast<uint64_t>(std::numeric_limits<T>::max()))
      return std::nullopt;
    return static_cast<T>(v.i);
  }
  return std::nullopt;
}

}  // namespace

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "uint8";
    case ValueType::INT8: return "int8";
    case ValueType::UINT16: return "uint16";
    case ValueType::INT16: return "int16";
    case ValueType::UINT32: return "uint32";
    case ValueType::INT32: return "int32";
    case ValueType::FLOAT32: return "float32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "uint64";
    case ValueType::INT64: return "int64";
    case ValueType::FLOAT64: return "float64";
  }
  return "invalid value type";
}

Value Value::from_u32(uint32_t v) { Value r; r.type = ValueType::UINT32; r.u = v; return r; }
Value Value::from_u64(uint64_t v) { Value r; r.type = ValueType::UINT64; r.u = v; return r; }
Value Value::from_i32(int32_t v) { Value r; r.type = ValueType::INT32; r.i = v; return r; }
Value Value::from_f32(float v) { Value r; r.type = ValueType::FLOAT32; r.f = v; return r; }
Value Value::from_bool(bool v) { Value r; r.type = ValueType::BOOL; r.u = v ? 1 : 0; return r; }
Value Value::from_string(std::string v) { Value r; r.type = ValueType::STRING; r.s = std::move(v); return r; }

Value Value::from_strings(const std::vector<std::string>& v) {
  Value r;
  r.type = ValueType::ARRAY;
  r.elem_type = ValueType::STRING;
  r.array.reserve(v.size());
  for (const auto& s : v) r.array.push_back(from_string(s));
  return r;
}

Value Value::from_f32s(const std::vector<float>& v) {
  Value r;
  r.type = ValueType::ARRAY;
  r.elem_type = ValueType::FLOAT32;
  r.array.reserve(v.size());
  for (float x : v) r.array.push_back(from_f32(x));
  return r;
}

Value Value::from_i32s(const std::vector<int32_t>& v) {
  Value r;
  r.type = ValueType::ARRAY;
  r.elem_type = ValueType::INT32;
  r.array.reserve(v.size());
  for (int32_t x : v) r.array.push_back(from_i32(x));
  return r;
}

const Value* Metadata::find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void Metadata::add(std::string key, Value v) {
  if (!index_.emplace(key, entries_.size()).second) fail(source_, "duplicate metadata key '" + key + "'");
  entries_.emplace_back(std::move(key), std::move(v));
}

namespace {
[[noreturn]] void mismatch(const std::string& source, std::string_view key, const Value& v,
                           std::string_view wanted) {
  fail(source, "metadata key '" + std::string(key) + "' has type " + describe(v) + ", expected " +
                   std::string(wanted));
}
}  // namespace

std::optional<uint64_t> Metadata::get_uint(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (auto r = integer_as<uint64_t>(*v)) return r;
  if (is_signed(v->type))
    fail(source_, "metadata key '" + std::string(key) + "' is " + std::to_string(v->i) +
                      ", expected a non-negative integer");
  mismatch(source_, key, *v, "an unsigned integer");
}

std::optional<int64_t> Metadata::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (auto r = integer_as<int64_t>(*v)) return r;
  if (is_unsigned(v->type))
    fail(source_, "metadata key '" + std::string(key) + "' is " + std::to_string(v->u) +
                      ", too large for a signed 64-bit integer");
  mismatch(source_, key, *v, "an integer");
}

std::optional<double> Metadata::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (is_float(v->type)) return v->f;
  if (is_unsigned(v->type)) return static_cast<double>(v->u);
  if (is_signed(v->type)) return static_cast<double>(v->i);
  mismatch(source_, key, *v, "a number");
}

std::optional<bool> Metadata::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::BOOL) mismatch(source_, key, *v, "bool");
  return v->u != 0;
}

std::optional<std::string> Metadata::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::STRING) mismatch(source_, key, *v, "string");
  return v->s;
}

std::optional<std::vector<std::string>> Metadata::get_string_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::ARRAY || v->elem_type != ValueType::STRING) mismatch(source_, key, *v, "array of string");
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const auto& e : v->array) out.push_back(e.s);
  return out;
}

std::optional<std::vector<int64_t>> Metadata::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::ARRAY || !(is_signed(v->elem_type) || is_unsigned(v->elem_type)))
    mismatch(source_, key, *v, "array of integers");
  std::vector<int64_t> out;
  out.reserve(v->array.size());
  for (size_t k = 0; k < v->array.size(); ++k) {
    auto x = integer_as<int64_t>(v->array[k]);
    if (!x)
      fail(source_, "metadata key '" + std::string(key) + "' element " + std::to_string(k) +
                        " is too large for a signed 64-bit integer");
    out.push_back(*x);
  }
  return out;
}

std::optional<std::vector<float>> Metadata::get_float_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  const ValueType et = v->elem_type;
  if (v->type != ValueType::ARRAY || !(is_float(et) || is_signed(et) || is_unsigned(et)))
    mismatch(source_, key, *v, "array of numbers");
  std::vector<float> out;
  out.reserve(v->array.size());
  for (const auto& e : v->array) {
    if (is_float(et)) out.push_back(static_cast<float>(e.f));
    else if (is_signed(et)) out.push_back(static_cast<float>(e.i));
    else out.push_back(static_cast<float>(e.u));
  }
  return out;
}

uint64_t Metadata::require_uint(std::string_view key) const {
  if (auto v = get_uint(key)) return *v;
  fail(source_, "missing metadata key " + std::string(key));
}

double Metadata::require_float(std::string_view key) const {
  if (auto v = get_float(key)) return *v;
  fail(source_, "missing metadata key " + std::string(key));
}

std::string Metadata::require_string(std::string_view key) const {
  if (auto v = get_string(key)) return *v;
  fail(source_, "missing metadata key " + std::string(key));
}

}  // namespace sluice::gguf
