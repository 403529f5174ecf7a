// The C API's GenerationConfig conversion is driven by the field table
// (core/generation_fields.h): every field flipped on the C++ side survives C++ -> C -> C++,
// the C defaults are the C++ defaults, and an out-of-range value of any field given
// through dti_generate_tokens fails with DTI_INVALID_ARGUMENT naming that field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "capi/capi_internal.h"
#include "core/generation_fields.h"
#include "detinfer/c_api.h"
#include "devtools/model_tools.h"

namespace detinfer {
namespace {

using core::FieldSpec;
using core::ModelBound;

void expect_same(const GenerationConfig& a, const GenerationConfig& b, const std::string& what) {
#define DETINFER_EXPECT_FIELD(member, ...) \
  EXPECT_EQ(a.member, b.member) << what << ": field " #member;
  DETINFER_GENERATION_SCALAR_FIELDS(DETINFER_EXPECT_FIELD)
  DETINFER_GENERATION_OTHER_FIELDS(DETINFER_EXPECT_FIELD)
#undef DETINFER_EXPECT_FIELD
}

// Gives a field a value other than its default (the same one every time).
struct Flip {
  void operator()(std::int32_t& v) const { v += 7; }
  void operator()(std::uint32_t& v) const { v += 5; }
  void operator()(float& v) const { v += 0.25f; }
  void operator()(bool& v) const { v = !v; }
  void operator()(std::optional<std::uint64_t>& v) const { v = 0xDEADBEEFCAFEull; }
  void operator()(std::optional<std::vector<std::int32_t>>& v) const { v = {{3, 1, 2}}; }
  void operator()(std::vector<std::string>& v) const { v = {"x", "yz"}; }
  void operator()(ResponseFormat& v) const {
    v.type = ResponseFormatType::kJsonSchema;
    v.json_schema = R"({"type": "integer"})";
  }
};

// Flips field number `index` of the table (all of them when index is npos).
GenerationConfig flipped(std::size_t index) {
  GenerationConfig c;
  std::size_t i = 0;
  core::for_each_field(c, [&](const FieldSpec&, auto& member) {
    if (index == std::string::npos || i == index) Flip{}(member);
    ++i;
  });
  return c;
}

std::string key_of(std::size_t index) {
  GenerationConfig c;
  std::string key;
  std::size_t i = 0;
  core::for_each_field(c, [&](const FieldSpec& f, auto&) {
    if (i++ == index) key = f.key;
  });
  return key;
}

// C++ -> C -> C++, the lists passed as the C caller would.
GenerationConfig round_trip(const GenerationConfig& in) {
  dti_generation_config c = dti_generation_config_default();
  capi::from_generation_config(in, &c);
  std::vector<const char*> strings;
  for (const std::string& s : in.stop_strings) strings.push_back(s.c_str());
  c.stop_strings = strings.data();
  c.num_stop_strings = strings.size();
  if (in.stop_token_ids) {
    c.stop_token_ids = in.stop_token_ids->data();
    c.num_stop_token_ids = in.stop_token_ids->size();
  }
  if (in.response_format.type == ResponseFormatType::kJsonSchema) {
    c.json_schema = in.response_format.json_schema.c_str();
  }
  GenerationConfig out;
  EXPECT_EQ(capi::to_generation_config("test", &c, &out), DTI_OK) << dti_last_error();
  return out;
}

TEST(CapiGenerationConfig, DefaultsAreTheCxxDefaults) {
  const dti_generation_config c = dti_generation_config_default();
  EXPECT_EQ(c.struct_size, sizeof(dti_generation_config));
  EXPECT_EQ(c.stop_token_ids, nullptr);
  EXPECT_EQ(c.stop_strings, nullptr);
  GenerationConfig out = flipped(std::string::npos);  // every field is overwritten...
  out.stop_token_ids.reset();                         // ...but this one, which NULL leaves as it is
  ASSERT_EQ(capi::to_generation_config("test", &c, &out), DTI_OK);
  expect_same(out, GenerationConfig{}, "dti_generation_config_default()");
}

TEST(CapiGenerationConfig, EveryFieldSurvivesTheRoundTrip) {
  ASSERT_EQ(flipped(0).max_new_tokens, GenerationConfig{}.max_new_tokens + 7);
  for (std::size_t i = 0; i < core::kGenerationFieldCount; ++i) {
    const GenerationConfig in = flipped(i);
    expect_same(round_trip(in), in, "flipped " + key_of(i));
  }
  const GenerationConfig all = flipped(std::string::npos);
  EXPECT_TRUE(all.seed.has_value());
  EXPECT_TRUE(all.early_stopping);
  expect_same(round_trip(all), all, "all fields flipped");
}

TEST(CapiGenerationConfig, NullStopTokenIdsKeepTheDefaultIds) {
  GenerationConfig out;
  out.stop_token_ids = std::vector<std::int32_t>{5, 9};  // e.g. the model's eos ids
  const dti_generation_config c = dti_generation_config_default();
  ASSERT_EQ(capi::to_generation_config("test", &c, &out), DTI_OK);
  EXPECT_EQ(out.stop_token_ids, (std::vector<std::int32_t>{5, 9}));
  dti_generation_config none = dti_generation_config_default();
  const std::int32_t* empty = &none.max_new_tokens;  // any non-NULL pointer: zero ids
  none.stop_token_ids = empty;
  ASSERT_EQ(capi::to_generation_config("test", &none, &out), DTI_OK);
  EXPECT_EQ(out.stop_token_ids, std::vector<std::int32_t>{});
}

TEST(CapiGenerationConfig, NullListsWithCountsAreErrors) {
  dti_generation_config c = dti_generation_config_default();
  c.num_stop_token_ids = 2;
  GenerationConfig out;
  EXPECT_EQ(capi::to_generation_config("f", &c, &out), DTI_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dti_last_error()).find("stop_token_ids"), std::string::npos);
  c = dti_generation_config_default();
  c.num_stop_strings = 1;
  EXPECT_EQ(capi::to_generation_config("f", &c, &out), DTI_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dti_last_error()).find("stop_strings"), std::string::npos);
}

TEST(CapiSessionOptions, DefaultsAndEveryPlainOptionReachSessionOptions) {
  SessionOptions out;
  out.threads = 99;
  out.cache.result.enabled = !SessionOptions{}.cache.result.enabled;
  ASSERT_EQ(capi::to_session_options("test", nullptr, &out), DTI_OK);
  const SessionOptions d;
  EXPECT_EQ(out.threads, d.threads);
  EXPECT_EQ(out.cache.result.enabled, d.cache.result.enabled);
  EXPECT_EQ(out.cache.prefix.memory.enabled, d.cache.prefix.memory.enabled);
  EXPECT_EQ(out.cache.prefix.memory.budget_bytes, d.cache.prefix.memory.budget_bytes);

  dti_session_options c = dti_session_options_default();
  c.threads = 3;
  c.kv_budget_bytes = 1 << 20;
  c.kv_block_size = 8;
  c.max_batch = 5;
  c.prefill_chunk_tokens = 17;
  c.max_queue = 9;
  c.prefix_cache = d.cache.prefix.enabled ? 0 : 1;
  c.disk_cache_bytes = 12345;
  c.prefix_cache_redis = d.cache.prefix.redis.enabled ? 0 : 1;
  c.result_cache = d.cache.result.enabled ? 0 : 1;
  c.result_cache_memory_bytes = 4321;
  c.result_cache_redis = d.cache.result.use_redis ? 0 : 1;
  c.redis_port = 7000;
  c.prefix_cache_memory_bytes = -1;
  SessionOptions o;
  ASSERT_EQ(capi::to_session_options("test", &c, &o), DTI_OK) << dti_last_error();
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(o.kv_budget_bytes, 1 << 20);
  EXPECT_EQ(o.kv_block_size, 8);
  EXPECT_EQ(o.max_batch, 5);
  EXPECT_EQ(o.prefill_chunk_tokens, 17);
  EXPECT_EQ(o.max_queue, 9);
  EXPECT_EQ(o.cache.prefix.enabled, !d.cache.prefix.enabled);
  EXPECT_EQ(o.cache.prefix.disk.budget_bytes, 12345);
  EXPECT_EQ(o.cache.prefix.redis.enabled, !d.cache.prefix.redis.enabled);
  EXPECT_EQ(o.cache.result.enabled, !d.cache.result.enabled);
  EXPECT_EQ(o.cache.result.memory_budget_bytes, 4321);
  EXPECT_EQ(o.cache.result.use_redis, !d.cache.result.use_redis);
  EXPECT_EQ(o.cache.redis.port, 7000);
  EXPECT_FALSE(o.cache.prefix.memory.enabled);
}

class CapiBadField : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("DETINFER_TEST_TMP");
    devtools::TinyModelOptions o;
    o.out_dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/capi-options-model-" +
                std::to_string(static_cast<long>(getpid()));
    o.seed = 3;
    devtools::make_tiny_model(o);
    dti_session_options so = dti_session_options_default();
    so.threads = 1;
    so.fingerprint_level = 0;
    ASSERT_EQ(dti_session_open(o.out_dir.c_str(), &so, &session_), DTI_OK) << dti_last_error();
    ASSERT_EQ(dti_session_vocab_size(session_, &vocab_), DTI_OK);
  }
  static void TearDownTestSuite() { dti_session_close(session_); }

  // Generates with `c` and expects DTI_INVALID_ARGUMENT naming `field`.
  static void expect_names(const dti_generation_config& c, const std::string& field,
                           const std::string& what) {
    const std::int32_t prompt[] = {1, 2, 3};
    dti_result* result = nullptr;
    EXPECT_EQ(dti_generate_tokens(session_, prompt, 3, &c, nullptr, nullptr, &result),
              DTI_INVALID_ARGUMENT)
        << what;
    EXPECT_EQ(result, nullptr);
    const std::string error = dti_last_error();
    EXPECT_NE(error.find("(field: " + field + ")"), std::string::npos) << what << ": " << error;
    dti_result_free(result);
  }

  static dti_session* session_;
  static std::int64_t vocab_;
};
dti_session* CapiBadField::session_ = nullptr;
std::int64_t CapiBadField::vocab_ = 0;

TEST_F(CapiBadField, EveryScalarFieldOutOfRangeIsNamed) {
  // Below the low end and above the high end of every field whose C type can hold such
  // a value (a bool is any int32_t; first_sample_index spans all of uint32_t, so its
  // "low" value wraps to 2^32 - 1, which overflows first_sample_index + n).
  int checked = 0;
#define DETINFER_BAD_FIELD(member, lo, hi, lo_open, hi_open, bound, affects, range)               \
  if (!std::is_same_v<decltype(GenerationConfig::member), bool>) {                                \
    using T = decltype(dti_generation_config::member);                                            \
    dti_generation_config c = dti_generation_config_default();                                    \
    c.member = static_cast<T>((lo_open) ? (lo) : (lo)-1);                                         \
    expect_names(c, #member, #member " below its range");                                         \
    const double high = (bound) == ModelBound::kVocabSize       ? static_cast<double>(vocab_ + 1) \
                        : (bound) == ModelBound::kContextLength ? static_cast<double>(INT32_MAX)  \
                        : (hi_open)                             ? (hi)                            \
                                                                : (hi) + 1.0;                                                 \
    if (high <= static_cast<double>(INT32_MAX)) {                                                 \
      c = dti_generation_config_default();                                                        \
      c.member = static_cast<T>(high);                                                            \
      expect_names(c, #member, #member " above its range");                                       \
    }                                                                                             \
    ++checked;                                                                                    \
  }
  {
    using namespace core;  // NOLINT: the table's arguments name core's constants
    DETINFER_GENERATION_SCALAR_FIELDS(DETINFER_BAD_FIELD)
  }
#undef DETINFER_BAD_FIELD
  EXPECT_EQ(checked, 16);  // the 18 scalar fields less the two bools
}

TEST_F(CapiBadField, ListFieldsOutOfRangeAreNamed) {
  dti_generation_config c = dti_generation_config_default();
  const std::int32_t ids[] = {0, static_cast<std::int32_t>(vocab_)};
  c.stop_token_ids = ids;
  c.num_stop_token_ids = 2;
  expect_names(c, "stop_token_ids", "a stop id outside the vocabulary");
  c = dti_generation_config_default();
  const char* strings[] = {"ok", ""};
  c.stop_strings = strings;
  c.num_stop_strings = 2;
  expect_names(c, "stop_strings", "an empty stop string");
}

}  // namespace
}  // namespace detinfer
