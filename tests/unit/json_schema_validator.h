// An independent JSON Schema check for the tests, over the keywords
// grammar/json_schema.h supports, written directly against nlohmann::json
// values (no prefix logic): what constrained output must satisfy.
#pragma once

#include <nlohmann/json.hpp>

namespace sluice::test {

inline bool validates_at(const nlohmann::json& root, const nlohmann::json& s,
                         const nlohmann::json& v, int depth = 0) {
  using nlohmann::json;
  if (depth > 64) return false;
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const std::string r = s["$ref"];
    if (!validates_at(root, root.at(json::json_pointer(r.substr(1))), v, depth + 1)) return false;
  }
  if (s.contains("type")) {
    auto is = [&](const std::string& t) {
      if (t == "object") return v.is_object();
      if (t == "array") return v.is_array();
      if (t == "string") return v.is_string();
      if (t == "number") return v.is_number();
      if (t == "integer") return v.is_number_integer();
      if (t == "boolean") return v.is_boolean();
      return t == "null" && v.is_null();
    };
    bool ok = false;
    if (s["type"].is_array()) {
      for (const json& t : s["type"]) ok |= is(t.get<std::string>());
    } else {
      ok = is(s["type"].get<std::string>());
    }
    if (!ok) return false;
  }
  if (s.contains("const") && v != s["const"]) return false;
  if (s.contains("enum")) {
    bool found = false;
    for (const json& e : s["enum"]) found |= e == v;
    if (!found) return false;
  }
  if (v.is_object()) {
    for (const json& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) return false;
    const json props = s.value("properties", json::object());
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (props.contains(it.key())) {
        if (!validates_at(root, props[it.key()], it.value(), depth + 1)) return false;
      } else if (s.contains("additionalProperties")) {
        if (!validates_at(root, s["additionalProperties"], it.value(), depth + 1)) return false;
      }
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    if (s.contains("items"))
      for (const json& x : v)
        if (!validates_at(root, s["items"], x, depth + 1)) return false;
  }
  if (s.contains("anyOf")) {
    bool any = false;
    for (const json& a : s["anyOf"]) any |= validates_at(root, a, v, depth + 1);
    if (!any) return false;
  }
  if (s.contains("oneOf")) {
    int n = 0;
    for (const json& a : s["oneOf"]) n += validates_at(root, a, v, depth + 1);
    if (n != 1) return false;
  }
  return true;
}

inline bool validates(const nlohmann::json& schema, const nlohmann::json& v) {
  return validates_at(schema, schema, v);
}

}  // namespace sluice::test
