#include "openai_fields.h"

#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/generation_fields.h"
#include "openai_protocol.h"
#include "response_format_param.h"

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

// A plain request parameter: read by the field table, not apart and not derived.
bool is_plain_param(const FieldSpec& f) {
  return !listed(kNotParams, f.key) && !listed(kReadApart, f.key);
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

// Reads one plain field from the request body (the client's value wins over what `c`
// holds) and records that the client gave it.
struct ReadField {
  const json& body;
  const ModelLimits& model;
  const ParamNames& names;
  FieldSources& sources;

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
    if constexpr (std::is_same_v<T, detinfer::ResponseFormat>) {
      const std::string param = request_param(f.key, names);
      if (!body.contains(param) || body[param].is_null()) return;
      member = read_response_format(body[param]);
      sources.set(f.key, FieldSource::kClient);
    } else if constexpr (std::is_arithmetic_v<T>) {
      if (!is_plain_param(f)) return;
      const std::string param = request_param(f.key, names);
      if (!body.contains(param) || body[param].is_null()) return;
      const json& v = body[param];
      sources.set(f.key, FieldSource::kClient);
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

// Copies the plain fields of the model's defaults into `c` (their source: the model).
struct ModelDefault {
  const detinfer::GenerationConfig& defaults;
  FieldSources& sources;

  template <typename T>
  void operator()(const FieldSpec& f, T& member) const {
    if constexpr (std::is_arithmetic_v<T>) {
      if (!is_plain_param(f)) return;
      detinfer::core::for_each_field(defaults, [&](const FieldSpec& g, const auto& value) {
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, T>) {
          if (std::string_view(g.key) == f.key) member = value;
        }
      });
      sources.set(f.key, FieldSource::kModel);
    }
  }
};

}  // namespace

detinfer::GenerationConfig openai_defaults() {
  detinfer::GenerationConfig c;
  c.max_new_tokens = 16;
  c.temperature = 1.0f;
  return c;
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

std::string request_param(const std::string& field, const ParamNames& names) {
  if (field == "max_new_tokens") return names.max_tokens;
  if (field == "response_format") return names.response_format;
  if (names.dialect == Dialect::kChat) {
    if (field == "prompt" || field == "chat_template" || field == "template_name") {
      return "messages";
    }
    if (field == "logprobs") return "top_logprobs";
    if (field == "extra_variables_json") return "chat_template_kwargs";
    if (field == "tools_json") return "tools";
  }
  return openai_param(field);
}

void resolve_generation_params(const json& body, const ModelLimits& model,
                               const detinfer::GenerationConfig* model_defaults,
                               const ParamNames& names, detinfer::GenerationConfig& c,
                               FieldSources& sources) {
  c = openai_defaults();
  sources = FieldSources();
  if (model_defaults != nullptr) {
    detinfer::core::for_each_field(c, ModelDefault{*model_defaults, sources});
  }
  detinfer::core::for_each_field(c, ReadField{body, model, names, sources});
}

}  // namespace detinfer_cli
