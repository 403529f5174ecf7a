// The JSON Schema compiler, the JSON automaton and the token trie of constrained decoding.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "decode/json_automaton.h"
#include "decode/json_schema.h"
#include "decode/token_trie.h"
#include "detinfer/error.h"
#include "detinfer/philox.h"

namespace detinfer::decode {
namespace {

ResponseFormat schema(const std::string& text) {
  ResponseFormat f;
  f.type = ResponseFormatType::kJsonSchema;
  f.json_schema = text;
  return f;
}

// Whether the whole text is a complete value of the schema.
bool accepts(const std::shared_ptr<const JsonGrammar>& g, const std::string& text) {
  JsonState s(g.get());
  return s.advance(text) && s.can_end();
}

std::string error_of(const std::string& text) {
  try {
    compile_response_format(schema(text));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.field(), "response_format");
    return e.message();
  }
  return "";
}

TEST(JsonGrammar, UnsupportedKeywordsAreErrorsNamingThem) {
  for (const char* word : {"multipleOf", "allOf", "not", "patternProperties", "uniqueItems", "if",
                           "dependentRequired"}) {
    const std::string text = std::string(R"({"type": "object", ")") + word + R"(": 1})";
    EXPECT_NE(error_of(text).find(std::string("'") + word + "'"), std::string::npos) << word;
  }
  EXPECT_NE(error_of(R"({"type": "string", "format": "email"})").find("'email'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "tuple"})").find("'tuple'"), std::string::npos);
  EXPECT_NE(error_of(R"({"properties": {"a": {"multipleOf": 1}}})").find("/properties/a"),
            std::string::npos);
}

TEST(JsonGrammar, UnsatisfiableAndAmbiguousSchemasAreErrors) {
  EXPECT_NE(error_of("false"), "");
  EXPECT_NE(error_of(R"({"enum": []})"), "");
  EXPECT_NE(error_of(R"({"type": "array", "minItems": 3, "maxItems": 2})"), "");
  EXPECT_NE(error_of(R"({"type": "string", "minLength": 5, "maxLength": 2})"), "");
  EXPECT_NE(error_of(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})").find("oneOf"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "object", "additionalProperties": false, "required": ["a"]})"),
            "");
  EXPECT_NE(error_of("[1, 2]").find("must be an object"), std::string::npos);
}

TEST(JsonGrammar, HostileNestingIsRejectedBeforeWork) {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += R"({"items":)";
  deep += "true";
  for (int i = 0; i < 100000; ++i) deep += "}";
  EXPECT_NE(error_of(deep), "");
  std::string ok;
  for (int i = 0; i < 20; ++i) ok += R"({"type":"array","items":)";
  ok += R"({"type":"integer"})";
  for (int i = 0; i < 20; ++i) ok += "}";
  EXPECT_EQ(error_of(ok), "");
}

// Properties are generated in the schema text's order, not sorted (a tool call's "name"
// comes before its "arguments", as models write it).
TEST(JsonGrammar, PropertiesFollowTheSchemaTextsOrder) {
  const auto g = compile_response_format(schema(R"({"type": "object",
      "properties": {"name": {"const": "f"}, "arguments": {"type": "integer"}},
      "required": ["name", "arguments"], "additionalProperties": false})"));
  EXPECT_TRUE(accepts(g, R"({"name":"f","arguments":1})"));
  EXPECT_FALSE(accepts(g, R"({"arguments":1,"name":"f"})"));
}

TEST(JsonGrammar, ObjectsFollowPropertiesRequiredAndOrder) {
  const auto g = compile_response_format(schema(R"({"type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 3},
                     "c": {"type": "boolean"}},
      "required": ["b"], "additionalProperties": false})"));
  EXPECT_TRUE(accepts(g, R"({"b":"xy"})"));
  EXPECT_TRUE(accepts(g, R"({"a": -12, "b": "", "c": true})"));
  EXPECT_TRUE(accepts(g, R"({"a":0,"b":"abc"})"));
  EXPECT_FALSE(accepts(g, R"({"a":1})"));             // b is required
  EXPECT_FALSE(accepts(g, R"({"b":"abcd"})"));        // maxLength
  EXPECT_FALSE(accepts(g, R"({"b":"x","d":1})"));     // not a property
  EXPECT_FALSE(accepts(g, R"({"c":true,"b":"x"})"));  // schema order
  EXPECT_FALSE(accepts(g, R"({"a":01,"b":"x"})"));    // leading zero
  EXPECT_FALSE(accepts(g, R"({"a":1.5,"b":"x"})"));   // integer
  EXPECT_FALSE(accepts(g, R"({"b":"x"}  )"));         // nothing after the value
  EXPECT_FALSE(accepts(g, R"({"b":"x")"));            // incomplete
  JsonState s(g.get());
  EXPECT_TRUE(s.advance(R"({"b":"x"})"));
  EXPECT_TRUE(s.done());
  EXPECT_FALSE(s.advance(std::string(" ")));
  EXPECT_TRUE(s.dead());
}

TEST(JsonGrammar, ArraysEnumsUnionsAndFormats) {
  const auto arr = compile_response_format(schema(R"({"type": "array",
      "prefixItems": [{"const": "x"}, {"type": "null"}], "items": {"type": "number"},
      "minItems": 1, "maxItems": 3})"));
  EXPECT_TRUE(accepts(arr, R"(["x"])"));
  EXPECT_TRUE(accepts(arr, R"(["x", null, 2.25])"));
  EXPECT_FALSE(accepts(arr, R"([])"));
  EXPECT_FALSE(accepts(arr, R"(["x",null,1,2])"));
  EXPECT_FALSE(accepts(arr, R"(["y"])"));
  const auto en = compile_response_format(schema(R"({"enum": [1, 12, "a", [true], {"k": null}]})"));
  for (const char* ok : {"1", "12", "\"a\"", "[true]", "{\"k\":null}"}) {
    EXPECT_TRUE(accepts(en, ok)) << ok;
  }
  EXPECT_FALSE(accepts(en, "123"));
  EXPECT_FALSE(accepts(en, "2"));
  const auto any = compile_response_format(schema(R"({"anyOf": [
      {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false},
      {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false},
      {"type": ["null", "boolean"]}]})"));
  EXPECT_TRUE(accepts(any, R"({"a":5})"));
  EXPECT_TRUE(accepts(any, R"({"a":"s"})"));
  EXPECT_TRUE(accepts(any, "false"));
  EXPECT_FALSE(accepts(any, R"({"a":[]})"));
  const auto date = compile_response_format(schema(R"({"type": "string", "format": "date"})"));
  EXPECT_TRUE(accepts(date, R"("2024-02-28")"));
  EXPECT_FALSE(accepts(date, R"("2024-02-30")"));
  EXPECT_FALSE(accepts(date, R"("2024-13-01")"));
  const auto uuid = compile_response_format(schema(R"({"type": "string", "format": "uuid"})"));
  EXPECT_TRUE(accepts(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(accepts(uuid, R"("123e4567e89b-12d3-a456-426614174000")"));
}

TEST(JsonGrammar, StringsAreValidUtf8WithSimpleEscapes) {
  const auto g = compile_response_format(schema(R"({"type": "string", "maxLength": 2})"));
  EXPECT_TRUE(accepts(g, "\"\xC3\xA9\xE2\x82\xAC\""));  // two characters, five bytes
  EXPECT_TRUE(accepts(g, R"("\n\"")"));
  EXPECT_FALSE(accepts(g,
                       "\"\xC3\xA9\xE2\x82\xAC"
                       "a\""));
  EXPECT_FALSE(accepts(g, "\"\xC0\xAF\""));      // overlong
  EXPECT_FALSE(accepts(g, "\"\xED\xA0\x80\""));  // surrogate
  EXPECT_FALSE(accepts(g, "\"\x01\""));          // control character
  EXPECT_FALSE(accepts(g, R"("\u0041")"));       // \u escapes are not generated
}

TEST(JsonGrammar, JsonObjectAcceptsAnyObjectWithinTheDepthLimit) {
  ResponseFormat f;
  f.type = ResponseFormatType::kJsonObject;
  const auto g = compile_response_format(f);
  EXPECT_TRUE(accepts(g, R"({"a": [1, {"b": null}, "c", -0.5], "d": {}})"));
  EXPECT_FALSE(accepts(g, "[1]"));
  EXPECT_FALSE(accepts(g, "\"s\""));
  std::string deep = "{\"a\":";
  for (int i = 0; i < 200; ++i) deep += "[";
  JsonState s(g.get());
  EXPECT_FALSE(s.advance(deep));  // nesting beyond the automaton's bound is refused
}

// The trie's mask equals walking every token on its own, for random states (the string
// fast path included: plain tokens allowed by their character count).
void expect_mask_equals_walk(const ResponseFormat& f, std::uint64_t seed) {
  const std::string alphabet = "{}[]\":, abc01-.tnufrlse\\\n";
  std::vector<std::string> pieces;
  for (std::uint64_t i = 0; i < 3000; ++i) {
    std::string p;
    const std::uint32_t len = 1 + philox_bits(seed, 1, i, 0) % 5;
    for (std::uint32_t k = 0; k < len; ++k) {
      const std::uint32_t r = philox_bits(seed, 2, i * 8 + k, 0) % (alphabet.size() + 1);
      p += r == alphabet.size() ? std::string("\xC3\xA9") : std::string(1, alphabet[r]);
    }
    pieces.push_back(i % 97 == 0 ? std::string() : p);  // a few ids without a piece
  }
  const TokenTrie trie(pieces);
  const auto g = compile_response_format(f);
  JsonState state(g.get());
  std::vector<std::uint8_t> allowed;
  std::string text;
  int steps = 0;
  for (; steps < 60 && !state.done(); ++steps) {
    const std::size_t count = trie.mask(state, allowed);
    std::size_t expect = 0;
    std::vector<std::int32_t> ok_ids;
    for (std::size_t id = 0; id < pieces.size(); ++id) {
      JsonState s(g.get());
      s.copy_from(state);
      const bool ok = !pieces[id].empty() && s.advance(pieces[id]);
      ASSERT_EQ(allowed[id] != 0, ok) << "step " << steps << " token '" << pieces[id] << "'";
      expect += ok ? 1 : 0;
      if (ok) ok_ids.push_back(static_cast<std::int32_t>(id));
    }
    ASSERT_EQ(count, expect);
    ASSERT_FALSE(ok_ids.empty()) << "no token continues '" << text << "'";
    const std::int32_t pick = ok_ids[philox_bits(seed, 3, steps, 0) % ok_ids.size()];
    ASSERT_TRUE(state.advance(pieces[pick]));
    text += pieces[pick];
  }
  EXPECT_GT(steps, 3);
}

TEST(TokenTrie, MaskEqualsPerTokenWalk) {
  ResponseFormat object;
  object.type = ResponseFormatType::kJsonObject;
  for (std::uint64_t seed = 1; seed <= 3; ++seed) expect_mask_equals_walk(object, seed);
  expect_mask_equals_walk(schema(R"({"type": "array", "items": {"type": "string",
      "maxLength": 7}, "maxItems": 8})"),
                          4);
  expect_mask_equals_walk(schema(R"({"type": "array", "items": {"type": "string",
      "pattern": "^[a-c]+(\\n|-)?$", "maxLength": 6}, "maxItems": 8})"),
                          6);
  // A pattern string closing inside tokens (the DFA walk hands over to the automaton).
  for (std::uint64_t seed = 7; seed <= 9; ++seed) {
    expect_mask_equals_walk(schema(R"({"type": "object", "properties": {
        "s": {"type": "string", "pattern": "^[abc\\\\\"]+\\n?$", "maxLength": 5},
        "n": {"type": "integer"}}, "required": ["s", "n"], "additionalProperties": false})"),
                            seed);
  }
  expect_mask_equals_walk(schema(R"({"anyOf": [{"type": "string", "maxLength": 3},
      {"type": "string", "minLength": 2}]})"),
                          5);
}

}  // namespace
}  // namespace detinfer::decode
