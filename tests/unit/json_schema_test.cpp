// grammar/json_schema*: the compiler refuses what it cannot enforce, and the
// prefix checker accepts exactly the prefixes of documents a schema accepts
// (checked against an independent validator written here with nlohmann).
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "json_schema_validator.h"
#include "grammar/json_schema_prefix.h"
#include "util/error.h"

namespace sluice {
namespace SLUICE_TEST_FILE {

using nlohmann::json;
using grammar::JsonSchema;
using grammar::SchemaPrefix;

std::string compile_error(const json& schema) {
  try {
    JsonSchema::compile(schema);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JsonSchemaCompile, UnsupportedKeywordsAndBadRefsAreNamed) {
  EXPECT_EQ(compile_error({{"type", "object"},
                           {"properties", {{"a", {{"type", "string"}, {"pattern", "x"}}}}}}),
            "json_schema at /properties/a/pattern: the keyword \"pattern\" is not supported "
            "(supported: type, enum, "
            "const, properties, required, additionalProperties, items, minItems, maxItems, anyOf, "
            "oneOf, $ref, $defs)");
  EXPECT_EQ(compile_error({{"$ref", "#/$defs/missing"}}),
            "json_schema at /$ref: \"#/$defs/missing\" points at nothing in the schema");
  EXPECT_EQ(
      compile_error({{"$ref", "http://x/y"}}),
      "json_schema at /$ref: only local references (\"#...\") are supported, got \"http://x/y\"");
  EXPECT_EQ(compile_error({{"type", "strin"}}), "json_schema at /type: unknown type \"strin\"");
  EXPECT_EQ(compile_error({{"minItems", 3}, {"maxItems", 2}}),
            "json_schema: minItems is greater than maxItems");
  EXPECT_EQ(compile_error(json::array()), "json_schema: a schema must be an object or a boolean");
  EXPECT_EQ(compile_error({{"title", "t"}, {"description", "d"}, {"type", "null"}}), "(no error)");
}

// Every prefix of an accepted text is a prefix; the whole is accepted.
void expect_accepted(const json& schema, const std::string& text) {
  auto s = JsonSchema::compile(schema);
  for (size_t i = 0; i <= text.size(); ++i)
    EXPECT_TRUE(SchemaPrefix::is_prefix(*s, text.substr(0, i)))
        << schema.dump() << " at " << i << ": " << text;
  EXPECT_TRUE(SchemaPrefix::accepts(*s, text)) << schema.dump() << ": " << text;
  EXPECT_TRUE(test::validates(schema, json::parse(text))) << text;  // the reference agrees
}

// Refused as a prefix (so a constrained sampler can never produce it).
void expect_refused_prefix(const json& schema, const std::string& text) {
  auto s = JsonSchema::compile(schema);
  EXPECT_FALSE(SchemaPrefix::is_prefix(*s, text)) << schema.dump() << ": " << text;
}

const json kPerson = {
    {"type", "object"},
    {"properties",
     {{"name", {{"type", "string"}}},
      {"age", {{"type", "integer"}}},
      {"tags",
       {{"type", "array"}, {"items", {{"enum", {"a", "b"}}}}, {"minItems", 1}, {"maxItems", 2}}},
      {"pet", {{"anyOf", {{{"type", "null"}}, {{"$ref", "#/$defs/pet"}}}}}}}},
    {"required", {"name", "age"}},
    {"additionalProperties", false},
    {"$defs",
     {{"pet",
       {{"type", "object"},
        {"properties", {{"kind", {{"const", "cat"}}}}},
        {"required", {"kind"}}}}}}};

TEST(JsonSchemaPrefix, AcceptsDocumentsAndAllTheirPrefixes) {
  expect_accepted(kPerson, R"({"name": "Ann", "age": 31})");
  expect_accepted(kPerson, R"({"age":-2,"name":"B\"\u00e9","tags":["a","b"],"pet":null})");
  expect_accepted(kPerson, R"({"name":"x","age":0,"pet":{"kind":"cat"}})");
  expect_accepted({{"type", "number"}}, "-12.5e+3");
  expect_accepted({{"type", {"boolean", "null"}}}, "false");
  expect_accepted({{"oneOf", {{{"type", "integer"}}, {{"type", "string"}}}}}, "7");
  expect_accepted(true, R"([1, {"a": "é"}])");
}

TEST(JsonSchemaPrefix, RefusesWhatTheSchemaForbids) {
  expect_refused_prefix(kPerson, R"({"nam3)");                         // no allowed key starts so
  expect_refused_prefix(kPerson, R"({"name":"a","name")");             // duplicate key
  expect_refused_prefix(kPerson, R"({"name":1)");                      // wrong type
  expect_refused_prefix(kPerson, R"({"name":"a"})");                   // 'age' is required
  expect_refused_prefix(kPerson, R"({"name":"a","age":1.5)");          // integer
  expect_refused_prefix(kPerson, R"({"name":"a","age":1,"tags":[])");  // minItems 1
  expect_refused_prefix(kPerson, R"({"name":"a","age":1,"tags":["a","b",)");    // maxItems 2
  expect_refused_prefix(kPerson, R"({"name":"a","age":1,"tags":["c)");          // enum
  expect_refused_prefix(kPerson, R"({"name":"a","age":1,"pet":{"kind":"dog)");  // $ref's const
  expect_refused_prefix(kPerson, R"({"name":"a","age":1,"pet":{}})");           // $ref's required
  expect_refused_prefix(kPerson, R"({"name":"a","age":1,"pet":null,"tags":["a"],)");  // no key left
  expect_refused_prefix({{"type", "string"}}, "\"a\x01");  // control byte
  expect_refused_prefix({{"type", "string"}}, "\"\xC3(");  // broken UTF-8
  expect_refused_prefix({{"oneOf", {{{"type", "number"}}, {{"type", "integer"}}}}},
                        "7 ");  // both match
  expect_refused_prefix(false, "1");
  // Whitespace runs are capped when asked.
  auto s = JsonSchema::compile(kPerson);
  EXPECT_TRUE(SchemaPrefix::is_prefix(*s, "{" + std::string(20, ' '), 20));
  EXPECT_FALSE(SchemaPrefix::is_prefix(*s, "{" + std::string(21, ' '), 20));
  EXPECT_TRUE(SchemaPrefix::is_prefix(*s, "{\n    ", 20));
  EXPECT_FALSE(SchemaPrefix::is_prefix(*s, "{\n\n", 20));  // one line break per run
}

TEST(JsonSchemaPrefix, IncrementalPushAgreesWithOneShotAndStaysFailed) {
  auto s = JsonSchema::compile(kPerson);
  SchemaPrefix p(s);
  const std::string text = R"({"name": "Ann", "age": 31})";
  for (size_t i = 0; i < text.size(); ++i) {
    EXPECT_FALSE(p.complete());
    EXPECT_TRUE(p.push(text.substr(i, 1)));
  }
  EXPECT_TRUE(p.complete());
  EXPECT_FALSE(p.push("x"));
  EXPECT_TRUE(p.failed());
  EXPECT_FALSE(p.push(" "));
}

TEST(JsonSchemaPrefix, ARefCycleWithoutInputMatchesNothingAndEnds) {
  auto s = JsonSchema::compile({{"$ref", "#"}});
  EXPECT_FALSE(SchemaPrefix::is_prefix(*s, "1"));
  // A recursive schema that consumes input is fine.
  const json tree = {{"type", "object"},
                     {"properties", {{"kids", {{"type", "array"}, {"items", {{"$ref", "#"}}}}}}},
                     {"additionalProperties", false}};
  expect_accepted(tree, R"({"kids":[{"kids":[]},{}]})");
}

}  // namespace
}  // namespace sluice
