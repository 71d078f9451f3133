// A JSON Schema compiled into the constraint the sampler enforces
// (response_format json_schema, forced tool calls).
//
// Supported, and enforced exactly: type (one or a list of object, array,
// string, number, integer, boolean, null), enum, const, properties,
// required, additionalProperties (false, true, or a schema), items,
// minItems, maxItems, anyOf, oneOf (exclusivity checked once a value is
// whole), $ref to "#", "#/$defs/NAME" or "#/definitions/NAME", and the
// boolean schemas true/false. Annotations (title, description, $schema,
// $id, $comment, default, examples) are ignored. Any other keyword is
// refused: compile() throws Error naming it and where it is, so a client
// never gets output that only looks like it follows its schema.
//
// enum and const match the value's compact JSON text (nlohmann's dump):
// the model writes the canonical form, which is what a constraint can
// check byte by byte.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sluice::grammar {

struct SchemaNode {
  enum Type : uint8_t {
    Object = 1,
    Array = 2,
    String = 4,
    Number = 8,
    Integer = 16,
    Boolean = 32,
    Null = 64
  };
  static constexpr uint8_t kAny = 127;
  uint8_t types = kAny;              // allowed types (Integer is a subset of Number)
  bool never = false;                // the schema `false`: nothing matches
  std::vector<std::string> choices;  // enum/const: the allowed values' compact texts (empty: any)
  bool has_choices = false;
  // object
  std::vector<std::pair<std::string, int>> properties;  // name -> node
  std::vector<std::string> required;
  bool additional = true;    // keys outside properties allowed
  int additional_node = -1;  // their schema (-1: any)
  // array
  int items = -1;                         // -1: any
  int64_t min_items = 0, max_items = -1;  // -1: no bound
  // combinators: the value must match this node and (one of / any of) these
  std::vector<int> any_of;
  bool one_of = false;
  int ref = -1;  // $ref: the value must also match that node
};

class JsonSchema {
 public:
  // Bounds on what a request may ask to compile (refused with an Error).
  static constexpr size_t kMaxNodes = 4096;
  static constexpr size_t kMaxChoiceBytes = 64 << 10;  // all enum/const texts together

  // Throws Error ("json_schema: ...") for a malformed schema, an unsupported
  // keyword, an unresolvable $ref, or a $ref cycle that consumes no input.
  static std::shared_ptr<const JsonSchema> compile(const nlohmann::json& schema);

  const SchemaNode& node(int i) const { return nodes_[static_cast<size_t>(i)]; }
  int root() const { return 0; }

 private:
  std::vector<SchemaNode> nodes_;
  friend class SchemaCompiler;
};

}  // namespace sluice::grammar
