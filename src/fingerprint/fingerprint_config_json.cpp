#include "fingerprint/fingerprint_config_json.h"

#include <limits>
#include <type_traits>

#include "core/check.h"
#include "core/generation_fields.h"
#include "core/vocabulary.h"

namespace detinfer::fingerprint {

using core::as_array;
using core::as_integer;
using core::as_string;
using core::ObjectReader;

namespace {

constexpr std::int64_t kI32Min = std::numeric_limits<std::int32_t>::min();
constexpr std::int64_t kI32Max = std::numeric_limits<std::int32_t>::max();

template <typename T>
constexpr bool kIsSeed = std::is_same_v<T, std::optional<std::uint64_t>>;

// Reads one field of the table; unknown and missing keys are errors (ObjectReader).
struct ReadField {
  ObjectReader& r;

  template <typename T>
  void operator()(const core::FieldSpec& f, T& v) const {
    const char* key = f.key;
    if (!f.affects_output) return;  // a speed knob: never recorded (config_to_json)
    if constexpr (kIsSeed<T>) {
      // Recorded beside the config as the seed actually used.
    } else if constexpr (std::is_same_v<T, bool>) {
      v = r.boolean(key);
    } else if constexpr (std::is_same_v<T, float>) {
      // Values are stored as the float the session used; JSON keeps them as doubles that
      // round back to the same float.
      const double d = r.number(key);
      if (d > std::numeric_limits<float>::max() || d < -std::numeric_limits<float>::max()) {
        fail(r.policy().code, r.path_of(key), ": ", d, " is outside the float range");
      }
      v = static_cast<float>(d);
    } else if constexpr (std::is_same_v<T, std::int32_t>) {
      v = static_cast<std::int32_t>(r.integer(key, kI32Min, kI32Max));
    } else if constexpr (std::is_same_v<T, std::uint32_t>) {
      v = static_cast<std::uint32_t>(r.integer(key, 0, std::numeric_limits<std::uint32_t>::max()));
    } else if constexpr (std::is_same_v<T, std::optional<std::vector<std::int32_t>>>) {
      const json& stop = r.required(key);
      if (stop.is_null()) return;
      const std::string p = r.path_of(key);
      const json& a = as_array(stop, p, r.policy().code);
      std::vector<std::int32_t> ids;
      for (std::size_t i = 0; i < a.size(); ++i) {
        ids.push_back(static_cast<std::int32_t>(as_integer(a[i], p + "[" + std::to_string(i) + "]",
                                                           kI32Min, kI32Max, r.policy().code)));
      }
      v = std::move(ids);
    } else if constexpr (std::is_same_v<T, ResponseFormat>) {
      // Optional: recorded only when the output is constrained (older fingerprints and
      // unconstrained runs have no key).
      if (r.optional(key) == nullptr) return;
      ObjectReader o = r.object(key);
      const std::string type = o.string("type");
      const auto t = core::parse_response_format_type(type);
      if (!t) fail(o.policy().code, o.path_of("type"), ": '", type, "'");
      v.type = *t;
      v.json_schema = o.string("json_schema");
      o.done();
    } else {
      static_assert(std::is_same_v<T, std::vector<std::string>>, "a new kind of field");
      const std::string p = r.path_of(key);
      const json& a = r.array(key);
      for (std::size_t i = 0; i < a.size(); ++i) {
        v.push_back(as_string(a[i], p + "[" + std::to_string(i) + "]"));
      }
    }
  }
};

}  // namespace

json config_to_json(const GenerationConfig& c) {
  json j = json::object();
  core::for_each_field(c, [&](const core::FieldSpec& f, const auto& v) {
    using T = std::decay_t<decltype(v)>;
    // Speed knobs (speculative decoding) change no bit of the output: fingerprints and
    // transcripts keep the bytes they had before these fields existed.
    if (!f.affects_output) return;
    if constexpr (kIsSeed<T>) {
      // Recorded beside the config as the seed actually used.
    } else if constexpr (std::is_same_v<T, std::optional<std::vector<std::int32_t>>>) {
      j[f.key] = v ? json(*v) : json(nullptr);
    } else if constexpr (std::is_same_v<T, ResponseFormat>) {
      if (v.type != ResponseFormatType::kText) {
        j[f.key] = json{{"type", to_string(v.type)}, {"json_schema", v.json_schema}};
      }
    } else {
      j[f.key] = v;
    }
  });
  return j;
}

GenerationConfig config_from_json(const json& j, const std::string& path,
                                  const core::JsonReadPolicy& policy) {
  ObjectReader r(j, path, policy);
  GenerationConfig c;
  core::for_each_field(c, ReadField{r});
  r.done();
  return c;
}

}  // namespace detinfer::fingerprint
