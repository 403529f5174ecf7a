// The grammar of a response_format: a JSON Schema (the subset of docs/structured.md)
// compiled into a graph of nodes that the JSON automaton (json_automaton.h) walks one
// byte at a time. Compiling never recurses deeper than the schema's JSON nesting, which
// core::parse_json bounds before any work (kMaxSchemaDepth).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "decode/json_numbers.h"
#include "decode/json_pattern.h"
#include "detinfer/generation.h"

namespace detinfer::decode {

// Nesting limit of a schema's JSON text and of the values the automaton opens.
constexpr std::int32_t kMaxSchemaDepth = 32;
// Limits that keep every walk bounded (the automaton and docs/structured.md).
constexpr std::int32_t kMaxStacks = 16;        // ambiguous anyOf branches alive at once
constexpr std::int32_t kMaxNodes = 4096;       // compiled nodes of one schema
constexpr std::int32_t kMaxIntDigits = 15;     // digits before the point
constexpr std::int32_t kMaxFracDigits = 9;     // digits after it (numbers only)
constexpr std::int32_t kMaxItemsBound = 4096;  // largest minItems / minLength accepted
// The deepest automaton stack: values nest at most kMaxSchemaDepth levels (also in free
// JSON); a free object's key takes a frame of its own.
constexpr std::int32_t kMaxFrames = 2 * kMaxSchemaDepth + 2;

enum class NodeKind : std::uint8_t {
  kObject,   // properties in schema order, or free keys whose values follow `additional`
  kArray,    // prefixItems then items, minItems..maxItems
  kString,   // minLength..maxLength characters, or a format template
  kPattern,  // a string matching `pattern` (ASCII, minLength..maxLength)
  kNumber,   // JSON number without exponent
  kInteger,  // JSON integer
  kLiteral,  // one of `literals` (enum, const, true/false, null)
  kUnion,    // anyOf / oneOf / a list of types: one of `alts`
};

struct Property {
  std::string key;  // the key as JSON text, quotes included
  std::int32_t value = 0;
  bool required = false;
};

// A string format as a sequence of segments: a run of characters from a set (`chars`,
// count `count`) or one of several literal strings (`literals`).
struct FormatSegment {
  std::string chars;
  std::int32_t count = 0;
  std::vector<std::string> literals;
};

struct Node {
  NodeKind kind = NodeKind::kLiteral;
  // The fewest automaton frames a complete value of this node needs (itself and its
  // required children); kMaxFrames + 1: none within the limit. A value is opened only
  // where it fits, so a recursive schema ($ref) never starts what it cannot finish.
  std::int32_t min_frames = 1;
  // kObject
  std::vector<Property> props;
  std::vector<std::int32_t> next_required;  // per property index: first required >= it
  std::int32_t additional = -1;             // free-key value node, -1 = none
  // kArray
  std::vector<std::int32_t> prefix;
  std::int32_t items = -1;  // -1: no items after the prefix
  std::int32_t min_items = 0;
  std::int32_t max_items = INT32_MAX;
  // kNumber, kInteger: minimum/maximum/exclusive bounds (none: any number)
  std::optional<NumberBounds> bounds;
  // kString
  std::int32_t min_length = 0;
  std::int32_t max_length = INT32_MAX;
  std::vector<FormatSegment> format;  // empty: free text
  // kPattern
  std::shared_ptr<const PatternDfa> pattern;
  // kLiteral: JSON texts, compact
  std::vector<std::string> literals;
  // kUnion
  std::vector<std::int32_t> alts;
};

struct JsonGrammar {
  std::vector<Node> nodes;
  std::int32_t root = 0;
  std::int32_t key_string = 0;  // the free key of an object: a plain string
};

// Compiles a response format. Throws Error(kInvalidArgument, field "response_format")
// naming the unsupported keyword or the problem and where it is (a JSON pointer);
// nullptr for kText.
std::shared_ptr<const JsonGrammar> compile_response_format(const ResponseFormat& format);

}  // namespace detinfer::decode
