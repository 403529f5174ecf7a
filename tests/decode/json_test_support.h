// Test helpers of the JSON grammar tests: compiling a schema text, whole-text acceptance,
// the error a schema gets, and random walks over every printable ASCII byte.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "decode/json_automaton.h"
#include "decode/json_schema.h"
#include "detinfer/error.h"
#include "detinfer/philox.h"

namespace detinfer::decode {

inline std::shared_ptr<const JsonGrammar> grammar(const std::string& text) {
  ResponseFormat f;
  f.type = ResponseFormatType::kJsonSchema;
  f.json_schema = text;
  return compile_response_format(f);
}

// Whether the whole text is a complete value of the grammar.
inline bool accepts(const std::shared_ptr<const JsonGrammar>& g, const std::string& text) {
  JsonState s(g.get());
  return s.advance(text) && s.can_end();
}

// The message of the error compiling `text` gets ("" when it compiles).
inline std::string error_of(const std::string& text) {
  try {
    grammar(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.field(), "response_format");
    return e.message();
  }
  return "";
}

// Random walks over all printable ASCII bytes: every state either accepts some byte or is a
// complete value, so generation can never be cornered. Returns the completed values.
// Walks start after `prefix` (and again after each completed value).
inline std::vector<std::string> walk_never_stuck(const std::shared_ptr<const JsonGrammar>& g,
                                                 std::uint64_t seed, int steps,
                                                 const std::string& prefix = "") {
  std::vector<std::string> values;
  JsonState start(g.get());
  EXPECT_TRUE(start.advance(prefix));
  JsonState state = start;
  JsonState probe(g.get());
  std::string text = prefix;
  for (int i = 0; i < steps; ++i) {
    std::vector<std::uint8_t> ok;
    for (int c = 0x20; c < 0x7F; ++c) {
      probe.copy_from(state);
      if (probe.advance(static_cast<std::uint8_t>(c))) ok.push_back(static_cast<std::uint8_t>(c));
    }
    const bool end = state.can_end();
    EXPECT_TRUE(end || !ok.empty()) << "stuck after '" << text << "'";
    if (!end && ok.empty()) return values;
    // Ends with probability 1/4 where it may; deep closing is still reached by chance.
    if (ok.empty() || (end && philox_bits(seed, 7, i, 0) % 4 == 0)) {
      values.push_back(text);
      state = start;
      text = prefix;
      continue;
    }
    const std::uint8_t c = ok[philox_bits(seed, 8, i, 0) % ok.size()];
    EXPECT_TRUE(state.advance(c));
    text += static_cast<char>(c);
  }
  return values;
}

}  // namespace detinfer::decode
