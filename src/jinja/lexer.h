// Splits a template into text and the tokens of its tags, with Jinja2's whitespace
// handling as transformers configures it (trim_blocks, lstrip_blocks, `-`/`+` markers,
// no trailing newline kept).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace detinfer::jinja {

enum class TokenType : std::uint8_t {
  kText,        // literal template text (also the body of raw blocks)
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kVarBegin,    // {{
  kVarEnd,      // }}
  kName,
  kString,  // text holds the decoded value
  kInt,
  kFloat,
  kOperator,  // text holds the operator
  kEof,
};

struct Token {
  TokenType type;
  std::string text;
  std::int64_t int_value = 0;
  double float_value = 0;
  std::size_t offset = 0;  // into the normalized source, for line/column
};

struct LexResult {
  std::string source;  // newlines normalized to \n, one trailing newline dropped
  std::vector<Token> tokens;
};

// Throws a syntax error (see syntax_error) on unterminated tags or strings, bad characters.
LexResult lex(std::string_view source);

// Error(kInvalidArgument, "chat template line L, column C: what", "chat_template").
[[noreturn]] void syntax_error(std::string_view source, std::size_t offset,
                               const std::string& what);

}  // namespace detinfer::jinja
