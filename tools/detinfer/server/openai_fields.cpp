#include "openai_fields.h"

#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/generation_fields.h"
#include "openai_protocol.h"

namespace detinfer_cli {

using detinfer::core::FieldSpec;
using detinfer::core::ModelBound;
using nlohmann::json;

namespace {

struct Renamed {
  std::string_view field;
  std::string_view param;
};
// Where OpenAI's name differs from the table key.
constexpr Renamed kRenamed[] = {
    {"max_new_tokens", "max_tokens"}, {"num_return_sequences", "n"}, {"stop_strings", "stop"}};

// Fields that are not request parameters: the server derives them itself.
constexpr std::string_view kNotParams[] = {"first_sample_index", "stop_token_ids"};
// Parameters with a wire form of their own (parse_output / parse_sampling read them).
constexpr std::string_view kReadApart[] = {"seed", "stop_strings", "logprobs"};

struct Narrowed {
  std::string_view field;
  double hi;
  const char* range;
};
// OpenAI's own limits where they are narrower than the library's.
constexpr Narrowed kOpenAiLimits[] = {{"temperature", 2.0, "in [0, 2]"}};

const Narrowed* narrowed(const FieldSpec& f) {
  for (const Narrowed& n : kOpenAiLimits) {
    if (n.field == f.key) return &n;
  }
  return nullptr;
}

template <std::size_t N>
bool listed(const std::string_view (&list)[N], std::string_view key) {
  for (std::string_view k : list) {
    if (k == key) return true;
  }
  return false;
}

// The field's range in words, with the model's bound (or OpenAI's limit) filled in.
std::string range_text(const FieldSpec& f, double hi) {
  if (const Narrowed* n = narrowed(f)) return n->range;
  std::string s = f.range;
  const auto brace = s.find("{}");
  if (brace != std::string::npos)
    s.replace(brace, 2, std::to_string(static_cast<std::int64_t>(hi)));
  return s;
}

struct ReadField {
  const json& body;
  const ModelLimits& model;

  double upper(const FieldSpec& f) const {
    switch (f.bound) {
      case ModelBound::kVocabSize:
        return static_cast<double>(model.vocab_size);
      case ModelBound::kContextLength:
        return static_cast<double>(model.context_length);
      case ModelBound::kNone:
        break;
    }
    const Narrowed* n = narrowed(f);
    return n != nullptr ? n->hi : f.hi;
  }

  template <typename T>
  void operator()(const FieldSpec& f, T& member) const {
    if constexpr (std::is_arithmetic_v<T>) {
      if (listed(kNotParams, f.key) || listed(kReadApart, f.key)) return;
      const std::string param = openai_param(f.key);
      if (!body.contains(param) || body[param].is_null()) return;
      const json& v = body[param];
      if constexpr (std::is_same_v<T, bool>) {
        if (!v.is_boolean()) reject(param, "'" + param + "' must be a boolean");
        member = v.get<bool>();
      } else {
        const bool integral = v.is_number_integer() || v.is_number_unsigned();
        if (std::is_integral_v<T> ? !integral : !v.is_number()) {
          reject(param,
                 "'" + param + "' must be " + (std::is_integral_v<T> ? "an integer" : "a number"));
        }
        const double hi = upper(f);
        const double d = v.get<double>();
        const bool in = std::isfinite(d) && (f.lo_open ? d > f.lo : d >= f.lo) &&
                        (f.hi_open ? d < hi : d <= hi);
        if (!in)
          reject(param, "'" + param + "' must be " + range_text(f, hi) + ", got " + v.dump());
        if constexpr (std::is_integral_v<T>) {
          member = static_cast<T>(v.get<std::int64_t>());
        } else {
          member = static_cast<T>(d);
        }
      }
    }
  }
};

// Collects the plain request parameters of a config, by OpenAI name, in table order.
struct PlainParams {
  std::vector<std::pair<std::string, json>>* out;

  template <typename T>
  void operator()(const FieldSpec& f, const T& member) const {
    if constexpr (std::is_arithmetic_v<T>) {
      if (listed(kNotParams, f.key) || listed(kReadApart, f.key)) return;
      out->emplace_back(openai_param(f.key), json(member));
    }
  }
};

std::vector<std::pair<std::string, json>> plain_params(const detinfer::GenerationConfig& c) {
  std::vector<std::pair<std::string, json>> out;
  detinfer::core::for_each_field(c, PlainParams{&out});
  return out;
}

}  // namespace

detinfer::GenerationConfig openai_defaults() {
  detinfer::GenerationConfig c;
  c.max_new_tokens = 16;
  c.temperature = 1.0f;
  return c;
}

void add_default_params(json& body, const detinfer::GenerationConfig& defaults) {
  const auto base = plain_params(openai_defaults());
  const auto wanted = plain_params(defaults);
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    const std::string& param = wanted[i].first;
    if (wanted[i].second == base[i].second) continue;
    if (!body.contains(param) || body[param].is_null()) body[param] = wanted[i].second;
  }
}

std::string openai_param(const std::string& field) {
  for (const Renamed& r : kRenamed) {
    if (r.field == field) return std::string(r.param);
  }
  return field;
}

bool is_generation_param(const std::string& key) {
  bool found = false;
  detinfer::GenerationConfig c;
  detinfer::core::for_each_field(c, [&](const FieldSpec& f, const auto&) {
    found = found || (!listed(kNotParams, f.key) && openai_param(f.key) == key);
  });
  return found;
}

void read_generation_params(const json& body, const ModelLimits& model,
                            detinfer::GenerationConfig& c) {
  detinfer::core::for_each_field(c, ReadField{body, model});
}

}  // namespace detinfer_cli
