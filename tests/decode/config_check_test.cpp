#include "decode/config_check.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>

#include "detinfer/error.h"

namespace detinfer::decode {
namespace {

const ConfigLimits kLimits{1000, 256};

// Expects validate_config to throw InvalidArgument whose message and field() name `field`.
void expect_invalid(const std::function<void(GenerationConfig&)>& edit, const std::string& field) {
  GenerationConfig c;
  edit(c);
  try {
    validate_config(c, kLimits);
    FAIL() << "no error for " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find(field), std::string::npos) << e.message();
    EXPECT_EQ(e.field(), field) << e.message();
  }
}

TEST(ConfigCheck, DefaultsAndFullSamplingConfigAreValid) {
  EXPECT_NO_THROW(validate_config(GenerationConfig{}, kLimits));
  GenerationConfig c;
  c.temperature = 0.8f;
  c.top_k = 50;
  c.top_p = 0.9f;
  c.min_p = 0.05f;
  c.repetition_penalty = 1.2f;
  c.presence_penalty = -2.0f;
  c.frequency_penalty = 2.0f;
  c.num_return_sequences = 4;
  c.stop_token_ids = std::vector<std::int32_t>{0, 999};
  c.stop_strings = {"\n\n"};
  c.logprobs = 20;
  c.max_new_tokens = 256;
  EXPECT_NO_THROW(validate_config(c, kLimits));
  GenerationConfig b;
  b.num_beams = 4;
  b.num_return_sequences = 4;
  b.length_penalty = -1.0f;
  b.early_stopping = true;
  EXPECT_NO_THROW(validate_config(b, kLimits));
}

TEST(ConfigCheck, EveryOutOfRangeFieldIsNamed) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  expect_invalid([](auto& c) { c.max_new_tokens = 0; }, "max_new_tokens");
  expect_invalid([](auto& c) { c.max_new_tokens = 257; }, "max_new_tokens");
  expect_invalid([](auto& c) { c.temperature = -0.1f; }, "temperature");
  expect_invalid([](auto& c) { c.temperature = 101.0f; }, "temperature");
  expect_invalid([&](auto& c) { c.temperature = nan; }, "temperature");
  expect_invalid([](auto& c) { c.top_k = -1; }, "top_k");
  expect_invalid([](auto& c) { c.top_k = 1001; }, "top_k");
  expect_invalid([](auto& c) { c.top_p = 0.0f; }, "top_p");
  expect_invalid([](auto& c) { c.top_p = 1.5f; }, "top_p");
  expect_invalid([](auto& c) { c.min_p = 1.0f; }, "min_p");
  expect_invalid([](auto& c) { c.min_p = -0.5f; }, "min_p");
  expect_invalid([](auto& c) { c.repetition_penalty = 0.0f; }, "repetition_penalty");
  expect_invalid([](auto& c) { c.repetition_penalty = 11.0f; }, "repetition_penalty");
  expect_invalid([](auto& c) { c.presence_penalty = 2.5f; }, "presence_penalty");
  expect_invalid([&](auto& c) { c.frequency_penalty = inf; }, "frequency_penalty");
  expect_invalid([](auto& c) { c.num_return_sequences = 0; }, "num_return_sequences");
  expect_invalid([](auto& c) { c.num_return_sequences = 65; }, "num_return_sequences");
  expect_invalid([](auto& c) { c.num_beams = 0; }, "num_beams");
  expect_invalid([](auto& c) { c.num_beams = 65; }, "num_beams");
  expect_invalid([&](auto& c) { c.length_penalty = nan; }, "length_penalty");
  expect_invalid([](auto& c) { c.logprobs = 21; }, "logprobs");
  expect_invalid([](auto& c) { c.logprobs = -1; }, "logprobs");
  expect_invalid([](auto& c) { c.stop_token_ids = std::vector<std::int32_t>{1000}; },
                 "stop_token_ids");
  expect_invalid([](auto& c) { c.stop_token_ids = std::vector<std::int32_t>{-1}; },
                 "stop_token_ids");
  expect_invalid([](auto& c) { c.stop_strings = {""}; }, "stop_strings");
  expect_invalid([](auto& c) { c.stop_strings = std::vector<std::string>(17, "x"); },
                 "stop_strings");
  expect_invalid(
      [](auto& c) {
        c.temperature = 1.0f;
        c.num_return_sequences = 2;
        c.first_sample_index = 0xffffffffu;
      },
      "first_sample_index");
}

TEST(ConfigCheck, ContradictionsAreNamed) {
  expect_invalid(
      [](auto& c) {
        c.num_beams = 2;
        c.temperature = 0.5f;
      },
      "temperature");
  expect_invalid(
      [](auto& c) {
        c.num_beams = 2;
        c.top_k = 5;
      },
      "top_k");
  expect_invalid(
      [](auto& c) {
        c.num_beams = 2;
        c.num_return_sequences = 3;
      },
      "num_return_sequences");
  expect_invalid([](auto& c) { c.num_return_sequences = 2; }, "num_return_sequences");
  expect_invalid(
      [](auto& c) {
        c.num_beams = 2;
        c.ignore_eos = true;
      },
      "ignore_eos");
  // Speculative decoding refuses beam search; the n-gram bounds must be ordered.
  expect_invalid(
      [](auto& c) {
        c.num_beams = 2;
        c.draft_tokens = 4;
      },
      "draft_tokens");
  expect_invalid(
      [](auto& c) {
        c.draft_ngram_min = 4;
        c.draft_ngram_max = 2;
      },
      "draft_ngram_min");
  expect_invalid([](auto& c) { c.draft_tokens = 9; }, "draft_tokens");
  expect_invalid([](auto& c) { c.draft_tokens = -1; }, "draft_tokens");
  expect_invalid([](auto& c) { c.draft_ngram_max = 0; }, "draft_ngram_max");
  GenerationConfig c;
  c.num_beams = 8;
  try {
    validate_config(c, ConfigLimits{10, 0});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("num_beams"), std::string::npos);
  }
}

}  // namespace
}  // namespace detinfer::decode
