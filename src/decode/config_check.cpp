#include "decode/config_check.h"

#include <cmath>
#include <string>
#include <type_traits>

#include "core/check.h"
#include "core/generation_fields.h"
#include "decode/json_schema.h"

namespace detinfer::decode {

namespace {

using core::FieldSpec;
using core::ModelBound;

template <typename... Args>
[[noreturn]] void bad(const char* field, Args&&... args) {
  throw Error(ErrorCode::kInvalidArgument,
              str_cat("GenerationConfig.", field, std::forward<Args>(args)...), field);
}

double upper_bound(const FieldSpec& f, const ConfigLimits& limits) {
  switch (f.bound) {
    case ModelBound::kVocabSize:
      return static_cast<double>(limits.vocab_size);
    case ModelBound::kContextLength:
      return limits.context_length > 0 ? static_cast<double>(limits.context_length) : INT32_MAX;
    case ModelBound::kNone:
      break;
  }
  return f.hi;
}

// The range in words with the model's bound filled in.
std::string range_text(const FieldSpec& f, double hi) {
  std::string s = f.range;
  const auto brace = s.find("{}");
  if (brace != std::string::npos) s.replace(brace, 2, str_cat(static_cast<std::int64_t>(hi)));
  return s;
}

bool in_range(double v, const FieldSpec& f, double hi) {
  return std::isfinite(v) && (f.lo_open ? v > f.lo : v >= f.lo) && (f.hi_open ? v < hi : v <= hi);
}

// Range checks of every field of the table.
struct CheckField {
  const ConfigLimits& limits;

  template <typename T>
  void operator()(const FieldSpec& f, const T& v) const {
    const double hi = upper_bound(f, limits);
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::optional<std::uint64_t>>) {
      // Every value is valid.
    } else if constexpr (std::is_arithmetic_v<T>) {
      if (!in_range(static_cast<double>(v), f, hi)) {
        if constexpr (std::is_floating_point_v<T>) {
          bad(f.key, " must be ", range_text(f, hi), ", got ", static_cast<double>(v));
        } else {
          bad(f.key, " must be ", range_text(f, hi), ", got ", static_cast<std::int64_t>(v));
        }
      }
    } else if constexpr (std::is_same_v<T, std::optional<std::vector<std::int32_t>>>) {
      if (!v) return;
      if (v->size() > f.hi) bad(f.key, " may hold at most ", f.hi, " ids, got ", v->size());
      for (const std::int32_t id : *v) {
        if (id < 0 || id >= hi) bad(f.key, ": id ", id, " is outside [0, ", limits.vocab_size, ")");
      }
    } else if constexpr (std::is_same_v<T, ResponseFormat>) {
      if (v.json_schema.size() > f.hi) {
        bad(f.key, ": the JSON schema may be at most ", f.hi, " bytes, got ", v.json_schema.size());
      }
      compile_response_format(v);  // throws naming the unsupported keyword
    } else {
      static_assert(std::is_same_v<T, std::vector<std::string>>, "a new kind of field");
      if (v.size() > f.hi) bad(f.key, " may hold at most ", f.hi, " strings, got ", v.size());
      for (const std::string& s : v) {
        if (s.empty() || s.size() > core::kMaxStopStringBytes) {
          bad(f.key, " entries must be 1..", core::kMaxStopStringBytes, " bytes, got one of ",
              s.size(), " bytes");
        }
      }
    }
  }
};

// Fields that contradict each other.
void check_combinations(const GenerationConfig& c, const ConfigLimits& limits) {
  if (static_cast<std::uint64_t>(c.first_sample_index) + c.num_return_sequences > UINT32_MAX) {
    bad("first_sample_index", " + num_return_sequences must fit in 32 bits, got ",
        c.first_sample_index, " + ", c.num_return_sequences);
  }
  if (c.num_beams > 1) {
    if (c.temperature != 0.0f) {
      bad("temperature", " must be 0 when num_beams > 1 (beam sampling is not supported), got ",
          c.temperature);
    }
    if (c.top_k != 0 || c.top_p != 1.0f || c.min_p != 0.0f) {
      const char* field = c.top_k != 0 ? "top_k" : c.top_p != 1.0f ? "top_p" : "min_p";
      throw Error(ErrorCode::kInvalidArgument,
                  str_cat("GenerationConfig.top_k/top_p/min_p must be off (0/1/0) when "
                          "num_beams > 1, got top_k=",
                          c.top_k, " top_p=", c.top_p, " min_p=", c.min_p),
                  field);
    }
    if (c.num_return_sequences > c.num_beams) {
      bad("num_return_sequences", " must be in [1, num_beams=", c.num_beams,
          "] with beam search, got ", c.num_return_sequences);
    }
    if (2 * static_cast<std::int64_t>(c.num_beams) > limits.vocab_size) {
      bad("num_beams", " must be at most vocab/2 = ", limits.vocab_size / 2, ", got ", c.num_beams);
    }
    if (c.ignore_eos) bad("ignore_eos", " must be false when num_beams > 1");
    if (c.draft_tokens != 0) {
      bad("draft_tokens",
          " must be 0 when num_beams > 1 (speculative decoding does not support beam search), "
          "got ",
          c.draft_tokens);
    }
    if (c.response_format.type != ResponseFormatType::kText) {
      bad("response_format",
          " must be text when num_beams > 1 (constrained beam search is not "
          "supported)");
    }
  } else if (c.num_return_sequences > 1 && c.temperature == 0.0f) {
    bad("num_return_sequences",
        " must be 1 when greedy (temperature 0, num_beams 1): n > 1 needs temperature > 0 or "
        "num_beams >= n, got ",
        c.num_return_sequences);
  }
  if (c.draft_ngram_min > c.draft_ngram_max) {
    bad("draft_ngram_min", " must be at most draft_ngram_max=", c.draft_ngram_max, ", got ",
        c.draft_ngram_min);
  }
  if (c.response_format.type != ResponseFormatType::kText && !c.stop_strings.empty()) {
    bad("stop_strings",
        " must be empty with a JSON response_format (a stop string would cut "
        "the structure; it ends by itself when complete)");
  }
}

}  // namespace

void validate_config(const GenerationConfig& c, const ConfigLimits& limits) {
  core::for_each_field(c, CheckField{limits});
  check_combinations(c, limits);
}

}  // namespace detinfer::decode
