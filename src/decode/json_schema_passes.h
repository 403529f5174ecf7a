// The passes that finish a compiled JsonGrammar once every node exists ($ref targets
// are compiled after the schema that refers to them, so a node's children may be filled
// in late; see json_schema.cpp): union flattening, type bits, oneOf disjointness, the
// anyOf branch width and each node's min_frames.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "decode/json_schema.h"

namespace detinfer::decode {

// JSON types as bits, for oneOf's disjointness (integer counts as number).
enum TypeBits : std::uint8_t {
  kObj = 1,
  kArr = 2,
  kStr = 4,
  kNum = 8,
  kBool = 16,
  kNull = 32,
  kAll = 63,
};

// A oneOf's alternatives (as compiled, before flattening) and where it is.
struct OneOfCheck {
  std::vector<std::int32_t> alts;
  std::string where;
};

// Error(kInvalidArgument, field "response_format") with the place in the schema.
[[noreturn]] void schema_error(const std::string& where, const std::string& what);

// The schema a $ref names: '#' (the root) or a JSON pointer into it ('#/$defs/name',
// '#/definitions/name', any path; ~0 and ~1 escapes). Other references (URLs,
// percent-encoding, anchors) and pointers that resolve to nothing are errors.
const nlohmann::ordered_json* resolve_schema_pointer(const nlohmann::ordered_json& root,
                                                     const std::string& text,
                                                     const std::string& where);

// Flattens unions (alternatives are never unions; cycles of unions add nothing), fixes
// the union nodes' type bits, checks oneOf disjointness and the branch width, and
// computes min_frames; a root that admits no value within kMaxFrames is an error.
void finish_grammar(JsonGrammar& g, std::vector<std::uint8_t>& bits,
                    const std::vector<OneOfCheck>& one_ofs);

}  // namespace detinfer::decode
