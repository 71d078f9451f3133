#include "grammar/json_schema.h"

#include <map>
#include <set>

#include "util/error.h"

namespace sluice::grammar {

using nlohmann::json;

// Builds JsonSchema::nodes_ from the schema document, one node per schema
// object reached (each $ref target compiled once, so recursion is a cycle of
// indices, not an endless tree).
class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root) : root_(root) {}

  std::shared_ptr<const JsonSchema> run() {
    compile(root_, "");
    auto s = std::make_shared<JsonSchema>();
    s->nodes_ = std::move(nodes_);
    return s;
  }

 private:
  [[noreturn]] static void bad(const std::string& where, const std::string& what) {
    throw Error("json_schema" + (where.empty() ? std::string() : " at " + where) + ": " + what);
  }

  int new_node(const std::string& where) {
    if (nodes_.size() >= JsonSchema::kMaxNodes)
      bad(where,
          "the schema has more than " + std::to_string(JsonSchema::kMaxNodes) + " subschemas");
    nodes_.emplace_back();
    return static_cast<int>(nodes_.size()) - 1;
  }

  static uint8_t type_bit(const json& t, const std::string& where) {
    if (!t.is_string()) bad(where + "/type", "must be a type name or an array of them");
    static const std::map<std::string, uint8_t> kTypes = {
        {"object", SchemaNode::Object},   {"array", SchemaNode::Array},
        {"string", SchemaNode::String},   {"number", SchemaNode::Number | SchemaNode::Integer},
        {"integer", SchemaNode::Integer}, {"boolean", SchemaNode::Boolean},
        {"null", SchemaNode::Null}};
    auto it = kTypes.find(t.get<std::string>());
    if (it == kTypes.end()) bad(where + "/type", "unknown type \"" + t.get<std::string>() + "\"");
    return it->second;
  }

  void add_choice(SchemaNode& n, const json& v) {
    std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
    choice_bytes_ += text.size();
    if (choice_bytes_ > JsonSchema::kMaxChoiceBytes)
      bad("", "enum/const values total more than " + std::to_string(JsonSchema::kMaxChoiceBytes) +
                  " bytes");
    n.choices.push_back(std::move(text));
  }

  int resolve(const json& ref, const std::string& where) {
    if (!ref.is_string()) bad(where + "/$ref", "must be a string");
    const std::string r = ref.get<std::string>();
    if (r.empty() || r[0] != '#')
      bad(where + "/$ref", "only local references (\"#...\") are supported, got \"" + r + "\"");
    const std::string ptr = r.substr(1);
    if (auto it = compiled_.find(ptr); it != compiled_.end()) return it->second;
    json::json_pointer p;
    try {
      p = json::json_pointer(ptr);
    } catch (const json::exception&) {
      bad(where + "/$ref", "\"" + r + "\" is not a JSON pointer");
    }
    if (!root_.contains(p)) bad(where + "/$ref", "\"" + r + "\" points at nothing in the schema");
    return compile(root_.at(p), ptr);
  }

  int compile(const json& s, const std::string& where) {
    if (auto it = compiled_.find(where); it != compiled_.end()) return it->second;
    const int i = new_node(where);
    compiled_[where] = i;
    if (s.is_boolean()) {
      nodes_[static_cast<size_t>(i)].never = !s.get<bool>();
      return i;
    }
    if (!s.is_object()) bad(where, "a schema must be an object or a boolean");
    static const std::set<std::string> kIgnored = {"title",    "description", "$schema",
                                                   "$id",      "$comment",    "default",
                                                   "examples", "$defs",       "definitions"};
    SchemaNode n;
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      const json& v = it.value();
      const std::string at = where + "/" + k;
      if (kIgnored.count(k)) continue;
      if (k == "type") {
        if (v.is_array()) {
          if (v.empty()) bad(at, "must not be empty");
          n.types = 0;
          for (const json& t : v) n.types |= type_bit(t, where);
        } else {
          n.types = type_bit(v, where);
        }
      } else if (k == "enum") {
        if (!v.is_array() || v.empty()) bad(at, "must be a non-empty array");
        n.has_choices = true;
        for (const json& c : v) add_choice(n, c);
      } else if (k == "const") {
        n.has_choices = true;
        add_choice(n, v);
      } else if (k == "properties") {
        if (!v.is_object()) bad(at, "must be an object");
        for (auto p = v.begin(); p != v.end(); ++p)
          n.properties.emplace_back(p.key(), compile(p.value(), at + "/" + p.key()));
      } else if (k == "required") {
        if (!v.is_array()) bad(at, "must be an array of strings");
        for (const json& r : v) {
          if (!r.is_string()) bad(at, "must be an array of strings");
          n.required.push_back(r.get<std::string>());
        }
      } else if (k == "additionalProperties") {
        if (v.is_boolean()) {
          n.additional = v.get<bool>();
        } else {
          n.additional_node = compile(v, at);
        }
      } else if (k == "items") {
        if (v.is_array()) bad(at, "the array (tuple) form is not supported; use one schema");
        n.items = compile(v, at);
      } else if (k == "minItems" || k == "maxItems") {
        if (!v.is_number_integer() || v.get<int64_t>() < 0) bad(at, "must be an integer >= 0");
        (k == "minItems" ? n.min_items : n.max_items) =
            std::min<int64_t>(v.get<int64_t>(), int64_t{1} << 30);
      } else if (k == "anyOf" || k == "oneOf") {
        if (!v.is_array() || v.empty()) bad(at, "must be a non-empty array of schemas");
        if (!n.any_of.empty()) bad(at, "anyOf and oneOf together are not supported");
        for (size_t j = 0; j < v.size(); ++j)
          n.any_of.push_back(compile(v[j], at + "/" + std::to_string(j)));
        n.one_of = k == "oneOf";
      } else if (k == "$ref") {
        n.ref = resolve(v, where);
      } else {
        bad(at, "the keyword \"" + k +
                    "\" is not supported (supported: type, enum, const, properties, required, "
                    "additionalProperties, items, minItems, maxItems, anyOf, oneOf, $ref, $defs)");
      }
    }
    for (const std::string& r : n.required) {
      bool known = false;
      for (const auto& p : n.properties) known |= p.first == r;
      if (!known && !n.additional)
        bad(where + "/required", "\"" + r + "\" is required but not allowed by properties");
    }
    if (n.max_items >= 0 && n.min_items > n.max_items)
      bad(where, "minItems is greater than maxItems");
    nodes_[static_cast<size_t>(i)] = std::move(n);
    return i;
  }

  const json& root_;
  std::vector<SchemaNode> nodes_;
  std::map<std::string, int> compiled_;  // JSON pointer -> node
  size_t choice_bytes_ = 0;
};

std::shared_ptr<const JsonSchema> JsonSchema::compile(const json& schema) {
  return SchemaCompiler(schema).run();
}

}  // namespace sluice::grammar
