#include "decode/config_check.h"

#include <cmath>

#include "core/check.h"

namespace detinfer::decode {

namespace {
[[noreturn]] void bad(const char* field, const char* range, double value) {
  fail(ErrorCode::kInvalidArgument, "GenerationConfig.", field, " must be ", range, ", got ",
       value);
}

void check_float(const char* field, float v, bool ok, const char* range) {
  if (!std::isfinite(v) || !ok) bad(field, range, static_cast<double>(v));
}
}  // namespace

void validate_config(const GenerationConfig& c, const ConfigLimits& limits) {
  const std::int64_t max_new = limits.context_length > 0 ? limits.context_length : INT32_MAX;
  if (c.max_new_tokens < 1 || c.max_new_tokens > max_new) {
    fail(ErrorCode::kInvalidArgument, "GenerationConfig.max_new_tokens must be in [1, ", max_new,
         "] (the context length), got ", c.max_new_tokens);
  }
  const float t = c.temperature;
  check_float("temperature", t, t == 0.0f || (t > 0.0f && t <= 100.0f),
              "0 (greedy) or in (0, 100]");
  if (c.top_k < 0 || c.top_k > limits.vocab_size) {
    fail(ErrorCode::kInvalidArgument, "GenerationConfig.top_k must be 0 (off) or in [1, ",
         limits.vocab_size, "] (the vocabulary size), got ", c.top_k);
  }
  check_float("top_p", c.top_p, c.top_p > 0.0f && c.top_p <= 1.0f, "in (0, 1] (1 = off)");
  check_float("min_p", c.min_p, c.min_p >= 0.0f && c.min_p < 1.0f, "in [0, 1) (0 = off)");
  check_float("repetition_penalty", c.repetition_penalty,
              c.repetition_penalty > 0.0f && c.repetition_penalty <= 10.0f, "in (0, 10] (1 = off)");
  check_float("presence_penalty", c.presence_penalty,
              c.presence_penalty >= -2.0f && c.presence_penalty <= 2.0f, "in [-2, 2]");
  check_float("frequency_penalty", c.frequency_penalty,
              c.frequency_penalty >= -2.0f && c.frequency_penalty <= 2.0f, "in [-2, 2]");
  if (c.num_return_sequences < 1 || c.num_return_sequences > kMaxReturnSequences) {
    fail(ErrorCode::kInvalidArgument, "GenerationConfig.num_return_sequences must be in [1, ",
         kMaxReturnSequences, "], got ", c.num_return_sequences);
  }
  if (c.num_beams < 1 || c.num_beams > kMaxBeams) {
    fail(ErrorCode::kInvalidArgument, "GenerationConfig.num_beams must be in [1, ", kMaxBeams,
         "], got ", c.num_beams);
  }
  check_float("length_penalty", c.length_penalty,
              c.length_penalty >= -10.0f && c.length_penalty <= 10.0f, "in [-10, 10]");
  if (c.logprobs < 0 || c.logprobs > kMaxLogprobs) {
    fail(ErrorCode::kInvalidArgument, "GenerationConfig.logprobs must be in [0, ", kMaxLogprobs,
         "], got ", c.logprobs);
  }
  if (static_cast<std::uint64_t>(c.first_sample_index) + c.num_return_sequences > UINT32_MAX) {
    fail(ErrorCode::kInvalidArgument,
         "GenerationConfig.first_sample_index + num_return_sequences must fit in 32 bits, got ",
         c.first_sample_index, " + ", c.num_return_sequences);
  }
  if (c.stop_token_ids) {
    if (c.stop_token_ids->size() > kMaxStopTokenIds) {
      fail(ErrorCode::kInvalidArgument, "GenerationConfig.stop_token_ids may hold at most ",
           kMaxStopTokenIds, " ids, got ", c.stop_token_ids->size());
    }
    for (const std::int32_t id : *c.stop_token_ids) {
      if (id < 0 || id >= limits.vocab_size) {
        fail(ErrorCode::kInvalidArgument, "GenerationConfig.stop_token_ids: id ", id,
             " is outside [0, ", limits.vocab_size, ")");
      }
    }
  }
  if (c.stop_strings.size() > kMaxStopStrings) {
    fail(ErrorCode::kInvalidArgument, "GenerationConfig.stop_strings may hold at most ",
         kMaxStopStrings, " strings, got ", c.stop_strings.size());
  }
  for (const std::string& s : c.stop_strings) {
    if (s.empty() || s.size() > kMaxStopStringBytes) {
      fail(ErrorCode::kInvalidArgument, "GenerationConfig.stop_strings entries must be 1..",
           kMaxStopStringBytes, " bytes, got one of ", s.size(), " bytes");
    }
  }
  // Contradictions.
  if (c.num_beams > 1) {
    if (c.temperature != 0.0f) {
      fail(ErrorCode::kInvalidArgument,
           "GenerationConfig.temperature must be 0 when num_beams > 1 (beam sampling is not "
           "supported), got ",
           c.temperature);
    }
    if (c.top_k != 0 || c.top_p != 1.0f || c.min_p != 0.0f) {
      fail(ErrorCode::kInvalidArgument,
           "GenerationConfig.top_k/top_p/min_p must be off (0/1/0) when num_beams > 1, got top_k=",
           c.top_k, " top_p=", c.top_p, " min_p=", c.min_p);
    }
    if (c.num_return_sequences > c.num_beams) {
      fail(ErrorCode::kInvalidArgument,
           "GenerationConfig.num_return_sequences must be in [1, num_beams=", c.num_beams,
           "] with beam search, got ", c.num_return_sequences);
    }
    if (2 * static_cast<std::int64_t>(c.num_beams) > limits.vocab_size) {
      fail(ErrorCode::kInvalidArgument,
           "GenerationConfig.num_beams must be at most vocab/2 = ", limits.vocab_size / 2, ", got ",
           c.num_beams);
    }
    if (c.ignore_eos) {
      fail(ErrorCode::kInvalidArgument,
           "GenerationConfig.ignore_eos must be false when num_beams > 1");
    }
  } else if (c.num_return_sequences > 1 && c.temperature == 0.0f) {
    fail(ErrorCode::kInvalidArgument,
         "GenerationConfig.num_return_sequences must be 1 when greedy "
         "(temperature 0, num_beams 1): n > 1 needs temperature > 0 or num_beams >= n, got ",
         c.num_return_sequences);
  }
}

}  // namespace detinfer::decode
