// The server's request parser is driven by the GenerationConfig field table: every
// field a request may carry is accepted under its OpenAI name, lands in the config, and a
// wrong type or an out-of-range value is a 400 naming that OpenAI parameter.
#include "openai_fields.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <type_traits>

#include "core/generation_fields.h"
#include "openai_protocol.h"
#include "session/tiny_session.h"

namespace detinfer_cli {
namespace {

using detinfer::core::FieldSpec;
using detinfer::core::ModelBound;
using nlohmann::json;

const ModelLimits kModel{512, 2048, nullptr};

ParseOutcome parse(json body) {
  body["prompt"] = json::array({1, 2, 3});
  return parse_completion_request(body.dump(), "tiny", kModel);
}

// Fields that are not request parameters, and those with wire forms of their own.
const std::set<std::string> kNotParams = {"first_sample_index", "stop_token_ids"};
const std::set<std::string> kOwnForm = {"seed", "stop_strings", "logprobs"};

TEST(OpenAiFields, NamesFollowTheTable) {
  EXPECT_EQ(openai_param("max_new_tokens"), "max_tokens");
  EXPECT_EQ(openai_param("num_return_sequences"), "n");
  EXPECT_EQ(openai_param("stop_strings"), "stop");
  EXPECT_EQ(openai_param("temperature"), "temperature");
  EXPECT_EQ(openai_param("messages[0].role"), "messages[0].role");
  EXPECT_EQ(openai_param(""), "");
  int params = 0;
  detinfer::GenerationConfig c;
  detinfer::core::for_each_field(c, [&](const FieldSpec& f, const auto&) {
    const bool accepted = kNotParams.count(f.key) == 0;
    EXPECT_EQ(is_generation_param(openai_param(f.key)), accepted) << f.key;
    params += accepted ? 1 : 0;
  });
  EXPECT_EQ(params, static_cast<int>(detinfer::core::kGenerationFieldCount) - 2);
  EXPECT_FALSE(is_generation_param("max_new_tokens"));  // only OpenAI's spelling
  EXPECT_FALSE(is_generation_param("frobnicate"));
}

// A valid non-default value of each plain field reaches the config; a wrong JSON type and
// a value outside the table's range are 400s naming the parameter.
TEST(OpenAiFields, EveryPlainFieldIsReadTypedAndRangeChecked) {
  int checked = 0;
  detinfer::GenerationConfig defaults;
  detinfer::core::for_each_field(defaults, [&](const FieldSpec& f, const auto& def) {
    using T = std::decay_t<decltype(def)>;
    if constexpr (std::is_arithmetic_v<T>) {
      if (kNotParams.count(f.key) != 0 || kOwnForm.count(f.key) != 0) return;
      const std::string p = openai_param(f.key);
      SCOPED_TRACE(p);
      ++checked;
      // A valid value that is not the default.
      json good;
      if constexpr (std::is_same_v<T, bool>) {
        good = !def;
      } else if constexpr (std::is_integral_v<T>) {
        good = static_cast<std::int64_t>(f.lo) + 1;
      } else {
        good = f.lo_open ? f.lo + 0.5 : f.lo + 0.25;
      }
      ParseOutcome ok = parse({{p, good}, {"temperature", 0.5}});
      if (p == "temperature") ok = parse({{p, good}});
      ASSERT_TRUE(ok.request) << ok.error.message;
      T got{};
      detinfer::core::for_each_field(ok.request->config, [&](const FieldSpec& g, const auto& v) {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, T>) {
          if (std::string(g.key) == f.key) got = v;
        }
      });
      if constexpr (std::is_same_v<T, bool>) {
        EXPECT_EQ(got, good.get<bool>());
      } else {
        EXPECT_EQ(static_cast<double>(got), good.get<double>());
      }

      ParseOutcome bad_type = parse({{p, "x"}});
      ASSERT_FALSE(bad_type.request);
      EXPECT_EQ(bad_type.error.status, 400);
      EXPECT_EQ(bad_type.error.param, p);

      if constexpr (!std::is_same_v<T, bool>) {
        const double low = f.lo_open ? f.lo : f.lo - 1;
        const json low_json =
            std::is_integral_v<T> ? json(static_cast<std::int64_t>(low)) : json(low);
        ParseOutcome below = parse({{p, low_json}});
        ASSERT_FALSE(below.request);
        EXPECT_EQ(below.error.param, p) << below.error.message;
        const double hi = f.bound == ModelBound::kVocabSize       ? kModel.vocab_size
                          : f.bound == ModelBound::kContextLength ? kModel.context_length
                          : p == "temperature"                    ? 2.0
                                                                  : f.hi;
        const double high = f.hi_open ? hi : hi + 1;
        const json high_json =
            std::is_integral_v<T> ? json(static_cast<std::int64_t>(high)) : json(high);
        ParseOutcome above = parse({{p, high_json}});
        ASSERT_FALSE(above.request);
        EXPECT_EQ(above.error.param, p) << above.error.message;
      }
    }
  });
  EXPECT_EQ(checked, 17);  // the 19 plain fields less first_sample_index and logprobs
}

TEST(OpenAiFields, OpenAiDefaultsAndLimits) {
  const ParseOutcome p = parse(json::object());
  ASSERT_TRUE(p.request);
  EXPECT_EQ(p.request->config.max_new_tokens, 16);
  EXPECT_EQ(p.request->config.temperature, 1.0f);
  const ParseOutcome hot = parse({{"temperature", 2.5}});  // within the library's 100
  ASSERT_FALSE(hot.request);
  EXPECT_EQ(hot.error.param, "temperature");
  EXPECT_NE(hot.error.message.find("in [0, 2]"), std::string::npos) << hot.error.message;
  const ParseOutcome ids = parse({{"first_sample_index", 1}});
  ASSERT_FALSE(ids.request);
  EXPECT_EQ(ids.error.param, "first_sample_index");  // not a request parameter
}

// The one resolution of a request's sampling fields (the chat endpoint's model defaults):
// every plain field the model's defaults set (whatever the field) is used where the
// request sets nothing, what the request sets wins, and the source of each is recorded.
TEST(OpenAiFields, ModelDefaultsFillWhatTheRequestLeavesOut) {
  detinfer::GenerationConfig d;  // e.g. DeterministicSession::default_generation_config()
  d.temperature = 0.7f;
  d.top_p = 0.9f;
  d.top_k = 40;
  d.min_p = 0.05f;
  d.repetition_penalty = 1.1f;
  d.presence_penalty = 0.5f;
  d.seed = 99;  // read apart: never filled
  const json body = {{"top_k", 7}, {"top_p", nullptr}, {"prompt", json::array({1, 2})}};
  detinfer::GenerationConfig c;
  FieldSources sources;
  resolve_generation_params(body, kModel, &d, ParamNames{}, c, sources);
  EXPECT_EQ(c.top_k, 7);  // the request's own value
  EXPECT_FALSE(c.seed.has_value());
  EXPECT_EQ(c.num_beams, 1);
  EXPECT_EQ(c.temperature, 0.7f);
  EXPECT_EQ(c.top_p, 0.9f);  // null counts as absent
  EXPECT_EQ(c.min_p, 0.05f);
  EXPECT_EQ(c.repetition_penalty, 1.1f);
  EXPECT_EQ(c.presence_penalty, 0.5f);
  EXPECT_EQ(sources.of("top_k"), FieldSource::kClient);
  EXPECT_EQ(sources.of("top_p"), FieldSource::kModel);
  EXPECT_EQ(sources.of("seed"), FieldSource::kApi);
  resolve_generation_params(json::object(), kModel, nullptr, ParamNames{}, c, sources);
  EXPECT_EQ(c.temperature, 1.0f);  // no model defaults: OpenAI's
  EXPECT_EQ(sources.of("temperature"), FieldSource::kApi);
  // detinfer's own default temperature (greedy) differs from OpenAI's 1: it is used too.
  const detinfer::GenerationConfig library;
  resolve_generation_params(json::object(), kModel, &library, ParamNames{}, c, sources);
  EXPECT_EQ(c.temperature, 0.0f);
  EXPECT_EQ(c.max_new_tokens, 64);
  EXPECT_EQ(sources.of("temperature"), FieldSource::kModel);
}

// One map from library field names to the request's parameter names, per dialect and
// spelling: a chat request that sent max_completion_tokens is told about that name.
TEST(OpenAiFields, RequestParamNamesTheClientsSpelling) {
  ParamNames completion;
  EXPECT_EQ(request_param("max_new_tokens", completion), "max_tokens");
  EXPECT_EQ(request_param("prompt", completion), "prompt");
  EXPECT_EQ(request_param("logprobs", completion), "logprobs");
  ParamNames chat;
  chat.dialect = Dialect::kChat;
  EXPECT_EQ(request_param("max_new_tokens", chat), "max_tokens");
  EXPECT_EQ(request_param("prompt", chat), "messages");
  EXPECT_EQ(request_param("logprobs", chat), "top_logprobs");
  EXPECT_EQ(request_param("extra_variables_json", chat), "chat_template_kwargs");
  EXPECT_EQ(request_param("num_return_sequences", chat), "n");
  chat.max_tokens = "max_completion_tokens";
  EXPECT_EQ(request_param("max_new_tokens", chat), "max_completion_tokens");
  detinfer::GenerationConfig c;
  FieldSources sources;
  try {
    resolve_generation_params({{"max_completion_tokens", 0}}, kModel, nullptr, chat, c, sources);
    ADD_FAILURE() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "max_completion_tokens");
    EXPECT_EQ(e.message.find("'max_completion_tokens' must be in [1, 2048]"), 0u) << e.message;
  }
}

// response_format, the table's one structured field: OpenAI's shapes land in the config;
// malformed ones are 400s naming response_format (the schema's keywords are checked by
// the session).
TEST(OpenAiFields, ResponseFormatShapes) {
  const json schema = {{"type", "integer"}};
  ParseOutcome js =
      parse({{"response_format",
              {{"type", "json_schema"},
               {"json_schema", {{"name", "n"}, {"schema", schema}, {"strict", true}}}}}});
  ASSERT_TRUE(js.request) << js.error.message;
  EXPECT_EQ(js.request->config.response_format.type, detinfer::ResponseFormatType::kJsonSchema);
  EXPECT_EQ(json::parse(js.request->config.response_format.json_schema), schema);
  ParseOutcome obj = parse({{"response_format", {{"type", "json_object"}}}});
  ASSERT_TRUE(obj.request) << obj.error.message;
  EXPECT_EQ(obj.request->config.response_format.type, detinfer::ResponseFormatType::kJsonObject);
  ParseOutcome text = parse({{"response_format", {{"type", "text"}}}});
  ASSERT_TRUE(text.request);
  EXPECT_EQ(text.request->config.response_format, detinfer::ResponseFormat{});
  for (const json& bad :
       {json("json"), json{{"type", "xml"}}, json{{"type", "json_schema"}},
        json{{"type", "json_object"}, {"schema", schema}},
        json{{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}},
        json{{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"strict", "yes"}}}},
        json{{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"extra", 1}}}}}) {
    ParseOutcome p = parse({{"response_format", bad}});
    ASSERT_FALSE(p.request) << bad;
    EXPECT_EQ(p.error.status, 400) << bad;
    EXPECT_EQ(p.error.param, "response_format") << bad;
  }
}

}  // namespace
// system_fingerprint promises that two servers with the same value give the same bits: so
// whatever changes the bits (here the KV storage dtype) changes it, and equal options give
// equal values.
TEST(SystemFingerprint, ChangesWithWhatChangesTheBits) {
  using detinfer::DeterministicSession;
  detinfer::SessionOptions o = detinfer::testing::tiny_options(1);
  const std::string dir = detinfer::testing::tiny_model_dir();
  const std::string f32 = system_fingerprint(DeterministicSession::open(dir, o));
  EXPECT_EQ(system_fingerprint(DeterministicSession::open(dir, o)), f32);
  std::set<std::string> seen = {f32};
  for (const detinfer::KvDType kv : {detinfer::KvDType::kBF16, detinfer::KvDType::kF16}) {
    o.kv_dtype = kv;
    EXPECT_TRUE(seen.insert(system_fingerprint(DeterministicSession::open(dir, o))).second)
        << detinfer::to_string(kv);
  }
}

}  // namespace detinfer_cli
