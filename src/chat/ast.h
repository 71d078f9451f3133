// The syntax tree of a parsed chat template: expressions (Expr) and
// statements (Node). Built by parser.cpp, walked by interpreter.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/value.h"

namespace sluice::chat {

struct Expr;
using ExprP = std::shared_ptr<Expr>;

struct Expr {
  enum class K { Lit, Name, List, Tuple, Dict, Attr, Item, Slice, Call, Filter, Test, Unary, Binary, Cond };
  K k;
  int line = 0;
  Value lit;                   // Lit
  std::string name;            // Name, Attr, Filter/Test name, Unary/Binary operator
  std::vector<ExprP> a;        // operands; Call: callee then args; Filter/Test: operand then args;
                               // Slice: object, start, stop, step (null when absent); Cond: then, cond, else
                               // Dict: key, value, key, value, ...
  std::vector<std::string> kw; // Call/Filter/Test: keyword name per argument ("" = positional)
  bool negated = false;        // Test: `is not`
  int height = 1;              // 1 + the tallest operand's: bounded by the parser (kMaxTemplateNesting)
};

struct Node;
using NodeP = std::shared_ptr<Node>;
using Body = std::vector<NodeP>;

struct Node {
  enum class K { Text, Output, If, For, Set, SetBlock, Macro, FilterBlock, Break, Continue, Scope };
  K k;
  int line = 0;
  std::string text;                    // Text; Macro name
  ExprP expr;                          // Output, For iterable, Set value, FilterBlock filter chain (operand null)
  std::vector<std::pair<ExprP, Body>> branches;  // If: (condition, body); else has a null condition
  Body body, else_body;                // For/SetBlock/Macro/FilterBlock/Scope body; For else
  std::vector<std::string> targets;    // For/Set/SetBlock: names (several = tuple unpacking)
  std::string attr;                    // Set: `ns.attr` target (targets[0] is ns)
  ExprP cond;                          // For: `for x in y if cond`
  std::vector<std::string> params;     // Macro parameter names
  std::vector<ExprP> defaults;         // Macro defaults (null = required), parallel to params
};

}  // namespace sluice::chat
