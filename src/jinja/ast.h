// The parsed template: one node type for statements and expressions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jinja/value.h"

namespace detinfer::jinja {

enum class NodeKind : std::uint8_t {
  // statements
  kText,         // name: the text
  kPrint,        // args[0]: expression
  kIf,           // args[0]: condition; body; else_body (an elif is a nested kIf)
  kFor,          // names: targets; args[0]: iterable, args[1]: filter or null; body; else_body;
                 // flag: the body mentions `loop` (else no loop object is built)
  kSet,          // name: variable, attr: namespace attribute or ""; names: unpack targets;
                 // args[0]: value
  kSetBlock,     // name, attr; args: filters (kFilter with a null operand); body
  kMacro,        // name; names: parameters; args: their defaults (null: none); body
  kCallBlock,    // args[0]: the call; names/kwargs: caller parameters/defaults; body
  kFilterBlock,  // args: filters (kFilter with a null operand); body
  kWith,         // names: variables; args: values; body
  kBreak,
  kContinue,
  kGroup,  // body (a generation block)
  // expressions
  kLiteral,  // value
  kName,     // name
  kList,     // args: items; flag: tuple
  kDict,     // args: keys; kwargs: values
  kAttr,     // args[0]: object; name
  kItem,     // args[0]: object; args[1]: key
  kSlice,    // args[0]: object; args[1..3]: start, stop, step (each may be null)
  kCall,     // args[0]: callee; args[1..]: positional; names/kwargs: keyword arguments
  kFilter,   // name; args[0]: operand; args[1..]: positional; names/kwargs: keyword
  kTest,     // name; args[0]: operand; args[1..]: arguments; flag: `is not`
  kUnary,    // name: "not", "-", "+"; args[0]
  kBinary,   // name: operator ("and", "or", "+", "~", "in", "not in", ...); args[0..1]
  kCompare,  // args[0]: first operand; names[k]: operator before args[k + 1]
  kCond,     // args[0]: value if true; args[1]: condition; args[2]: else value or null
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

struct Node {
  NodeKind kind;
  std::size_t offset = 0;  // into the normalized source
  std::string name;
  std::string attr;
  Value value;
  bool flag = false;
  NodeList args;
  std::vector<std::string> names;
  NodeList kwargs;
  NodeList body;
  NodeList else_body;

  Node(NodeKind k, std::size_t off) : kind(k), offset(off) {}
};

// A parsed template (Template's pImpl).
struct TemplateProgramData {
  std::string source;
  NodeList body;
};

}  // namespace detinfer::jinja
