// Numeric bounds and $ref of constrained decoding (docs/structured.md): exact acceptance,
// errors naming the keyword, and that the automaton never starts a value it cannot
// finish (random walks over every printable ASCII byte never get stuck).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "decode/json_automaton.h"
#include "decode/json_schema.h"
#include "decode/json_test_support.h"
#include "detinfer/error.h"
#include "detinfer/philox.h"

namespace detinfer::decode {
namespace {

TEST(JsonBounds, IntegerBoundsAreExact) {
  const auto g = grammar(R"({"type": "integer", "minimum": -7, "maximum": 12})");
  for (int v = -30; v <= 30; ++v) {
    EXPECT_EQ(accepts(g, std::to_string(v)), v >= -7 && v <= 12) << v;
  }
  EXPECT_FALSE(accepts(g, "120"));
  EXPECT_TRUE(accepts(g, "-0"));
  const auto ex = grammar(R"({"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 5})");
  for (int v = 0; v <= 9; ++v) EXPECT_EQ(accepts(ex, std::to_string(v)), v == 4) << v;
  const auto frac = grammar(R"({"type": "integer", "minimum": 2.5, "maximum": 1000.5})");
  EXPECT_FALSE(accepts(frac, "2"));
  EXPECT_TRUE(accepts(frac, "3"));
  EXPECT_TRUE(accepts(frac, "1000"));
  EXPECT_FALSE(accepts(frac, "1001"));
  const auto big = grammar(R"({"type": "integer", "minimum": 123456789012})");
  EXPECT_FALSE(accepts(big, "123456789011"));
  EXPECT_TRUE(accepts(big, "123456789012"));
  EXPECT_TRUE(accepts(big, "999999999999999"));
  for (const char* s : {R"({"type": "integer", "minimum": -7, "maximum": 12})",
                        R"({"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 5})",
                        R"({"type": "integer", "minimum": 99, "maximum": 101})",
                        R"({"type": "integer", "minimum": 123456789012})",
                        R"({"type": "integer", "maximum": -40})"}) {
    const auto values = walk_never_stuck(grammar(s), 11, 3000);
    EXPECT_GT(values.size(), 20u) << s;
  }
}

TEST(JsonBounds, NumberBoundsHoldOnTheNineDecimalGrid) {
  const auto g = grammar(R"({"type": "number", "minimum": 0.1, "maximum": 0.25})");
  for (const char* ok : {"0.1", "0.25", "0.2", "0.123456789", "0.100000000"}) {
    EXPECT_TRUE(accepts(g, ok)) << ok;
  }
  for (const char* no : {"0.09", "0.250000001", "0", "1", "-0.2", "0.26"}) {
    EXPECT_FALSE(accepts(g, no)) << no;
  }
  const auto ex = grammar(R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})");
  EXPECT_FALSE(accepts(ex, "0"));
  EXPECT_FALSE(accepts(ex, "0.0"));
  EXPECT_TRUE(accepts(ex, "0.000000001"));
  EXPECT_TRUE(accepts(ex, "0.999999999"));
  EXPECT_FALSE(accepts(ex, "1"));
  const auto zero = grammar(R"({"type": "number", "minimum": -0.0, "maximum": 1e-300})");
  EXPECT_TRUE(accepts(zero, "0"));
  EXPECT_TRUE(accepts(zero, "-0.0"));
  EXPECT_FALSE(accepts(zero, "0.000000001"));
  EXPECT_FALSE(accepts(zero, "-0.000000001"));
  const auto neg = grammar(R"({"type": "number", "minimum": -2.5, "maximum": -1e-20})");
  EXPECT_TRUE(accepts(neg, "-2.5"));
  EXPECT_FALSE(accepts(neg, "-2.500000001"));
  EXPECT_FALSE(accepts(neg, "-0"));  // -1e-20 rounds inward to -0.000000001
  EXPECT_TRUE(accepts(neg, "-0.000000001"));
  for (const char* s :
       {R"({"type": "number", "minimum": 0.1, "maximum": 0.25})",
        R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})",
        R"({"type": "number", "minimum": -2.5, "maximum": -1e-20})", R"({"minimum": 41.5})"}) {
    EXPECT_GT(walk_never_stuck(grammar(s), 12, 3000).size(), 20u) << s;
  }
}

TEST(JsonBounds, BadBoundsAreErrorsNamingTheKeyword) {
  EXPECT_NE(error_of(R"({"type": "integer", "minimum": 1.5, "maximum": 1.9})").find("admit no"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "integer", "minimum": 1e16})").find("admit no"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "number", "minimum": "1"})").find("'minimum'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "number", "exclusiveMinimum": true})").find("'exclusiveMinimum'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"enum": [1, 2], "maximum": 1})").find("'maximum'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "number", "multipleOf": 2})").find("'multipleOf'"),
            std::string::npos);
}

TEST(JsonRefs, DefsAndDefinitionsResolve) {
  const auto g = grammar(R"({"$defs": {"pt": {"type": "object",
      "properties": {"x": {"type": "integer", "minimum": 0}}, "required": ["x"],
      "additionalProperties": false}},
      "type": "array", "items": {"$ref": "#/$defs/pt"}, "maxItems": 2})");
  EXPECT_TRUE(accepts(g, R"([{"x":1},{"x":0}])"));
  EXPECT_FALSE(accepts(g, R"([{"x":-1}])"));
  EXPECT_FALSE(accepts(g, R"([{"y":1}])"));
  const auto d = grammar(R"({"definitions": {"a/b": {"enum": ["p"]}, "c~d": {"const": 1}},
      "type": "array", "prefixItems": [{"$ref": "#/definitions/a~1b"},
      {"$ref": "#/definitions/c~0d"}], "items": false})");
  EXPECT_TRUE(accepts(d, R"(["p",1])"));
  EXPECT_FALSE(accepts(d, R"(["p",2])"));
  const auto path = grammar(R"({"type": "object", "properties": {"a": {"type": "boolean"},
      "b": {"$ref": "#/properties/a"}}, "required": ["a", "b"], "additionalProperties": false})");
  EXPECT_TRUE(accepts(path, R"({"a":true,"b":false})"));
  EXPECT_FALSE(accepts(path, R"({"a":true,"b":1})"));
}

TEST(JsonRefs, RecursiveSchemasStayWithinTheDepthBound) {
  const std::string list = R"({"type": "object", "properties": {"v": {"type": "integer"},
      "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}, "required": ["v", "next"],
      "additionalProperties": false})";
  const auto g = grammar(list);
  EXPECT_TRUE(accepts(g, R"({"v":1,"next":{"v":2,"next":null}})"));
  EXPECT_FALSE(accepts(g, R"({"v":1,"next":{"v":2}})"));
  std::string deep, tail;
  for (int i = 0; i < 100; ++i) {
    deep += R"({"v":1,"next":)";
    tail += "}";
  }
  JsonState s(g.get());
  EXPECT_FALSE(s.advance(deep + "null" + tail));  // deeper than kMaxSchemaDepth
  const std::string tree = R"({"$defs": {"t": {"type": "object", "properties": {
      "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}},
      "id": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["id"],
      "additionalProperties": false}}, "$ref": "#/$defs/t"})";
  EXPECT_TRUE(accepts(grammar(tree), R"({"kids":[{"id":1},{"kids":[],"id":2}],"id":0})"));
  const std::string optional = R"({"type": "object", "properties": {"a": {"$ref": "#"},
      "id": {"type": "integer"}}, "required": ["id"], "additionalProperties": false})";
  const std::string bounded_list = R"({"type": "array", "items": {"$ref": "#"}, "maxItems": 2})";
  // The second item needs more depth than the first: a ',' must not open it too deep.
  const std::string uneven = R"({"type": "array", "prefixItems": [{"type": "integer"},
      {"type": "array", "minItems": 1, "items": {"type": "array", "minItems": 1,
      "items": {"type": "integer"}}}, {"$ref": "#"}], "items": false})";
  for (const auto& [sch, unit] :
       std::vector<std::pair<std::string, std::string>>{{list, R"({"v":1,"next":)"},
                                                        {tree, R"({"kids":[)"},
                                                        {optional, R"({"a":)"},
                                                        {bounded_list, "["},
                                                        {uneven, "[0,[[0]],"}}) {
    const auto g = grammar(sch);
    EXPECT_GT(walk_never_stuck(g, 13, 5000).size(), 5u) << sch;
    // As deep as the automaton goes, then random bytes: still never cornered.
    std::string deepest;
    JsonState probe(g.get());
    while (probe.advance(unit)) deepest += unit;
    EXPECT_GT(deepest.size(), 20 * unit.size()) << sch;
    walk_never_stuck(g, 14, 3000, deepest);
  }
  // A self-referencing anyOf adds nothing: the other alternative remains.
  EXPECT_TRUE(
      accepts(grammar(R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}},
          "$ref": "#/$defs/a"})"),
              "null"));
}

TEST(JsonRefs, HostileReferencesAreErrors) {
  EXPECT_NE(error_of(R"({"$ref": "#"})").find("circular"), std::string::npos);
  EXPECT_NE(error_of(R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
      "$ref": "#/$defs/a"})")
                .find("circular"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "object", "properties": {"n": {"$ref": "#"}},
      "required": ["n"]})")
                .find("admits no value"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"$ref": "#/$defs/missing"})").find("does not resolve"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref": "https://example.com/s.json"})").find("not supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"$ref": "#/$defs/a%20b", "$defs": {"a b": true}})").find("percent"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"$defs": {"a": true}, "$ref": "#/$defs/a", "type": "string"})")
                .find("'type' beside $ref"),
            std::string::npos);
  // A chain of 60 definitions, each holding the previous one twice: shared, not copied.
  std::string defs = R"({"$defs": {"d0": {"type": "integer"})";
  for (int i = 1; i < 60; ++i) {
    const std::string prev = "{\"$ref\": \"#/$defs/d" + std::to_string(i - 1) + "\"}";
    defs += ", \"d" + std::to_string(i) + "\": {\"type\": \"array\", \"prefixItems\": [" + prev +
            ", " + prev + "], \"items\": false}";
  }
  EXPECT_EQ(error_of(defs + R"(}, "$ref": "#/$defs/d59"})"), "");
  // Required all the way down, 80 levels: no value within the depth bound.
  std::string chain = R"({"$defs": {"d0": {"type": "integer"})";
  for (int i = 1; i < 80; ++i) {
    chain += ", \"d" + std::to_string(i) +
             "\": {\"type\": \"array\", \"prefixItems\": " + "[{\"$ref\": \"#/$defs/d" +
             std::to_string(i - 1) + "\"}], \"minItems\": 1}";
  }
  EXPECT_NE(error_of(chain + R"(}, "$ref": "#/$defs/d79"})").find("admits no value"),
            std::string::npos);
}

}  // namespace
}  // namespace detinfer::decode
