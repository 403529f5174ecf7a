// Constrained decoding through the session (docs/structured.md): errors name the keyword,
// a structure cut by max_new_tokens finishes "length", a complete one "stop", and
// constrained outputs do not depend on what they are batched with.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "detinfer/error.h"
#include "session/random_schema.h"
#include "session/tiny_session.h"

namespace detinfer::testing {
namespace {

DeterministicSession& session() {
  static DeterministicSession s = DeterministicSession::open(tiny_model_dir(), tiny_options(2));
  return s;
}

GenerationConfig with_schema(const std::string& schema, std::int32_t max_new_tokens = 200) {
  GenerationConfig c;
  c.max_new_tokens = max_new_tokens;
  c.response_format.type = ResponseFormatType::kJsonSchema;
  c.response_format.json_schema = schema;
  return c;
}

Error error_of(const GenerationConfig& c) {
  try {
    session().generate(Prompt("hi"), c);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error(ErrorCode::kInternal, "none");
}

TEST(StructuredOutput, UnsupportedKeywordIsAnInvalidArgumentNamingIt) {
  const Error e = error_of(with_schema(R"({"type": "string", "pattern": "(a)\\1"})"));
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.field(), "response_format");
  EXPECT_NE(e.message().find("'pattern'"), std::string::npos) << e.message();
  const Error m = error_of(with_schema(R"({"type": "number", "multipleOf": 2})"));
  EXPECT_EQ(m.field(), "response_format");
  EXPECT_NE(m.message().find("'multipleOf'"), std::string::npos) << m.message();
  EXPECT_EQ(error_of(with_schema("{not json")).field(), "response_format.json_schema");
  GenerationConfig stops = with_schema(R"({"type": "integer"})");
  stops.stop_strings = {"}"};
  EXPECT_EQ(error_of(stops).field(), "stop_strings");
  GenerationConfig beams = with_schema(R"({"type": "integer"})");
  beams.num_beams = 2;
  EXPECT_EQ(error_of(beams).field(), "response_format");
  GenerationConfig text;
  text.response_format.json_schema = "{}";
  EXPECT_EQ(error_of(text).field(), "response_format");
}

TEST(StructuredOutput, CompleteStructureStopsAndValidates) {
  const std::string schema = R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 6}, "n": {"type": "integer"},
      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}},
      "required": ["name", "n", "tags"], "additionalProperties": false})";
  for (const float t : {0.0f, 1.0f}) {
    GenerationConfig c = with_schema(schema);
    c.temperature = t;
    c.seed = 5;
    const GenerationResult r = session().generate(Prompt("Person: "), c);
    const Sequence& s = r.sequences.at(0);
    ASSERT_EQ(s.finish_reason, FinishReason::kStop) << s.text;
    const nlohmann::json v = nlohmann::json::parse(s.text);
    ASSERT_TRUE(v.is_object()) << s.text;
    EXPECT_TRUE(v["name"].is_string() && v["name"].get<std::string>().size() <= 6) << s.text;
    EXPECT_TRUE(v["n"].is_number_integer()) << s.text;
    EXPECT_TRUE(v["tags"].is_array() && v["tags"].size() <= 2) << s.text;
  }
}

TEST(StructuredOutput, MaxTokensInsideTheStructureFinishesLength) {
  GenerationConfig c = with_schema(
      R"({"type": "object", "properties": {"text": {"type": "string", "minLength": 40}},
          "required": ["text"]})",
      4);
  const Sequence s = session().generate(Prompt("x"), c).sequences.at(0);
  EXPECT_EQ(s.finish_reason, FinishReason::kLength);
  EXPECT_EQ(s.tokens.size(), 4u);
  EXPECT_FALSE(nlohmann::json::accept(s.text)) << s.text;
}

TEST(StructuredOutput, RootNumberEndsByStopTokenOrDigitLimit) {
  const Sequence s =
      session().generate(Prompt("7"), with_schema(R"({"type": "integer"})")).sequences.at(0);
  ASSERT_EQ(s.finish_reason, FinishReason::kStop) << s.text;
  EXPECT_TRUE(nlohmann::json::parse(s.text).is_number_integer()) << s.text;
}

TEST(StructuredOutput, JsonObjectIsAnObjectWhenComplete) {
  GenerationConfig c;
  c.response_format.type = ResponseFormatType::kJsonObject;
  c.max_new_tokens = 120;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    c.temperature = 1.0f;
    c.seed = seed;
    const Sequence s = session().generate(Prompt("{"), c).sequences.at(0);
    ASSERT_FALSE(s.text.empty());
    EXPECT_EQ(s.text[0], '{');
    if (s.finish_reason == FinishReason::kStop) {
      EXPECT_TRUE(nlohmann::json::parse(s.text).is_object()) << s.text;
    } else {
      EXPECT_EQ(s.finish_reason, FinishReason::kLength);
    }
  }
}

// 32 constrained requests submitted at once equal the same requests run alone.
TEST(StructuredOutput, ConcurrentOutputsEqualSoloOutputs) {
  RandomSchema gen(77);
  std::vector<GenerationConfig> configs;
  for (int i = 0; i < 32; ++i) {
    GenerationConfig c = with_schema(gen.next().dump(), 64);
    c.temperature = i % 2 == 0 ? 0.0f : 0.8f;
    c.top_p = i % 3 == 0 ? 0.9f : 1.0f;
    c.seed = 100 + i;
    c.logprobs = i % 4 == 0 ? 2 : 0;
    configs.push_back(c);
  }
  std::vector<GenerationResult> solo;
  for (const GenerationConfig& c : configs) solo.push_back(session().generate(Prompt("["), c));
  std::vector<RequestHandle> handles;
  for (const GenerationConfig& c : configs) handles.push_back(session().submit(Prompt("["), c));
  for (std::size_t i = 0; i < handles.size(); ++i) {
    const GenerationResult r = handles[i].get();
    expect_same(solo[i], r, "request " + std::to_string(i));
    EXPECT_EQ(solo[i].sequences[0].finish_reason, r.sequences[0].finish_reason);
  }
}

}  // namespace
}  // namespace detinfer::testing
