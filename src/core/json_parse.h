// The one JSON reader for untrusted text (model files, tokenizer files, fingerprints,
// HTTP request bodies) and the one bounded file reader. Every parse site goes through
// parse_json, so every input gets the same hardening.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "detinfer/error.h"

namespace detinfer::core {

struct JsonLimits {
  std::int32_t max_depth = 64;        // nesting of arrays and objects (the root is level 1)
  std::size_t max_bytes = 64u << 20;  // size of the text
  bool reject_duplicate_keys = true;  // a key twice in one object is an error, not "last wins"
};

// Strict parse of one JSON value:
//  - the text is at most limits.max_bytes and holds no NUL byte (nlohmann would stop at
//    one and ignore the rest);
//  - nesting is at most limits.max_depth, checked by an iterative pre-scan before the
//    parser runs, so every later recursion over the value (copy, dump, the tokenizer's
//    component builders) is bounded by max_depth;
//  - strings and the whole text are valid UTF-8 (no overlong forms, no surrogates,
//    unpaired \u escapes rejected);
//  - numbers that overflow a double (1e400) are rejected;
//  - nothing but whitespace follows the value; comments are not JSON.
// On failure throws Error(code, "<what>: not valid JSON: <reason> at byte N", field=what).
nlohmann::json parse_json(std::string_view text, const JsonLimits& limits, ErrorCode code,
                          std::string_view what);
// The same, keeping objects' keys in document order (Python's dicts, transformers): for
// client JSON that reaches a chat template or is echoed back.
nlohmann::ordered_json parse_json_ordered(std::string_view text, const JsonLimits& limits,
                                          ErrorCode code, std::string_view what);

// The nesting depth of JSON text (brackets outside strings; the root container is 1), in
// one iterative pass that stops once it exceeds `stop_above`. The text need not be valid.
std::int64_t json_nesting_depth(std::string_view text, std::int64_t stop_above);

// Reads a whole file of at most max_bytes. Throws Error(kNotFound) when it cannot be
// opened or read (or is a directory), Error(kCorrupt) when it is larger than max_bytes;
// both name `what` (e.g. "config.json") and the path, with field=what. Never reads more
// than max_bytes + 1 bytes, also from a file that grows or has no size (a pipe).
std::string read_file_bounded(const std::string& path, std::size_t max_bytes,
                              std::string_view what);

}  // namespace detinfer::core
