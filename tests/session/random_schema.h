// Test helper: seeded random JSON Schemas within the supported subset of
// docs/structured.md, every one with bounded outputs (short strings, few items, closed
// objects) so that a random-weight model completes most of them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "session/tiny_session.h"

namespace detinfer::testing {

class RandomSchema {
 public:
  explicit RandomSchema(std::uint64_t seed) : rng_{seed, 0x5c4e} {}

  nlohmann::json next() {
    using nlohmann::json;
    switch (rng_.next(10)) {
      case 0:  // a definition used by reference
        return {{"$defs", {{"d", value(1)}}},
                {"type", "array"},
                {"items", {{"$ref", "#/$defs/d"}}},
                {"maxItems", 2}};
      case 1: {  // a recursive tree: its depth is bounded by the automaton only
        const json kids = {{"type", "array"}, {"items", {{"$ref", "#/$defs/t"}}}, {"maxItems", 2}};
        const json t = {{"type", "object"},
                        {"properties", {{"id", bounded_number()}, {"kids", kids}}},
                        {"required", {"id"}},
                        {"additionalProperties", false}};
        return {{"$defs", {{"t", t}}}, {"$ref", "#/$defs/t"}};
      }
      default:
        return value(0);
    }
  }

 private:
  TestRng rng_;

  std::string name() {
    static const char* kNames[] = {"id",   "name", "tags", "x",    "y",     "ok",
                                   "kind", "n",    "a b",  "q\"t", "value", "items"};
    return kNames[rng_.next(12)];
  }

  // An integer or number with random inclusive or exclusive bounds (either may be absent).
  nlohmann::json bounded_number() {
    using nlohmann::json;
    const bool integer = rng_.next(2) == 0;
    json s = {{"type", integer ? "integer" : "number"}};
    const double lo = static_cast<double>(rng_.next(2001)) / (integer ? 1.0 : 8.0) - 1000.0;
    const double hi = lo + static_cast<double>(rng_.next(300) + 2) / (integer ? 1.0 : 16.0);
    const std::uint32_t which = rng_.next(4);
    if (which != 1) s[rng_.next(2) == 0 ? "minimum" : "exclusiveMinimum"] = lo;
    if (which != 2) s[rng_.next(2) == 0 ? "maximum" : "exclusiveMaximum"] = hi;
    return s;
  }

  // A string with a pattern of the supported subset (and sometimes lengths).
  nlohmann::json patterned() {
    static const char* kPatterns[] = {"^[a-z]{1,5}$",
                                      "^\\d{3}-\\d{2}$",
                                      "^(red|green|blue)$",
                                      "ab",
                                      "^[A-Z][a-z]*$",
                                      "^\\w+@\\w+\\.com$",
                                      "^[+-]?\\d+(\\.\\d+)?$",
                                      "^[^\\s\"]{2,}$",
                                      "x|^y$",
                                      "^(?:a|bc)*\\n?$",
                                      "[\"\\\\]",
                                      "^.{3}$"};
    nlohmann::json s = {{"type", "string"}, {"pattern", kPatterns[rng_.next(12)]}};
    const std::uint32_t lengths = rng_.next(3);
    if (lengths == 1) s["maxLength"] = 8 + rng_.next(8);  // every pattern has a string of 7
    if (lengths == 2) s["minLength"] = rng_.next(3);
    return s;
  }

  nlohmann::json scalar() {
    using nlohmann::json;
    switch (rng_.next(14)) {
      case 8:
      case 9:
        return bounded_number();
      case 10:
      case 11:
        return patterned();
      case 0:
        return {{"type", "integer"}};
      case 1:
        return {{"type", "number"}};
      case 2:
        return {{"type", "boolean"}};
      case 3:
        return {{"type", "null"}};
      case 4:
        return {{"enum", json::array({"red", "green", 3, nullptr, json::array({1, 2})})}};
      case 5:
        return {{"const", json{{"k", "v"}}}};
      case 6:
        return {{"type", "string"}, {"format", rng_.next(2) == 0 ? "date" : "uuid"}};
      case 7:
        return {{"type", json::array({"string", "null"})}, {"maxLength", 4}};
      default: {
        const std::uint32_t lo = rng_.next(3);
        return {{"type", "string"}, {"minLength", lo}, {"maxLength", lo + rng_.next(6)}};
      }
    }
  }

  nlohmann::json object(int depth) {
    using nlohmann::json;
    json props = json::object();
    json required = json::array();
    const std::uint32_t n = rng_.next(4);
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::string k = name();
      if (props.contains(k)) continue;
      props[k] = value(depth + 1);
      if (rng_.next(2) == 0) required.push_back(k);
    }
    json s = {{"type", "object"}, {"properties", props}, {"additionalProperties", false}};
    if (!required.empty()) s["required"] = required;
    return s;
  }

  nlohmann::json array(int depth) {
    using nlohmann::json;
    json s = {{"type", "array"}};
    if (rng_.next(3) == 0) {
      s["prefixItems"] = json::array({value(depth + 1), value(depth + 1)});
      s["items"] = false;
      s["minItems"] = rng_.next(3);
    } else {
      s["items"] = value(depth + 1);
      const std::uint32_t lo = rng_.next(2);
      s["minItems"] = lo;
      s["maxItems"] = lo + rng_.next(3);
    }
    return s;
  }

  nlohmann::json value(int depth) {
    using nlohmann::json;
    const std::uint32_t pick = depth >= 3 ? 0 : rng_.next(6);
    switch (pick) {
      case 1:
      case 2:
        return object(depth);
      case 3:
        return array(depth);
      case 4:
        return {{"anyOf", json::array({value(depth + 1), value(depth + 1)})}};
      case 5:
        return {{"oneOf", json::array({{{"type", "integer"}},
                                       {{"type", "string"}, {"maxLength", 3}},
                                       object(depth + 1)})}};
      default:
        return scalar();
    }
  }
};

}  // namespace detinfer::testing
