// The C option structs: their defaults (the C++ defaults) and their conversion, for every
// released struct_size.
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>

#include "capi/capi_internal.h"
#include "core/generation_fields.h"
#include "session/session_fields.h"

// The first released layouts: a caller compiled against 0.1's c_api.h passes these sizes.
static_assert(DTI_SESSION_OPTIONS_SIZE_V1 == 48, "dti_session_options v1 layout changed");
static_assert(DTI_GENERATION_CONFIG_SIZE_V1 == offsetof(dti_generation_config, response_format),
              "dti_generation_config v1 layout changed");
static_assert(DTI_GENERATION_CONFIG_SIZE_V2 ==
                  offsetof(dti_generation_config, json_schema) + sizeof(const char*),
              "dti_generation_config v2 layout changed");
static_assert(DTI_GENERATION_CONFIG_SIZE_V3 ==
                  offsetof(dti_generation_config, draft_ngram_max) + sizeof(std::int32_t),
              "dti_generation_config v3 layout changed");
static_assert(DTI_GENERATION_CONFIG_SIZE_V4 == sizeof(dti_generation_config),
              "dti_generation_config grew: add a DTI_GENERATION_CONFIG_SIZE_V5");
static_assert(DTI_SESSION_OPTIONS_SIZE_V4 ==
                  offsetof(dti_session_options, draft_model) + sizeof(const char*),
              "dti_session_options v4 layout changed");
static_assert(DTI_SESSION_OPTIONS_SIZE_V3 >=
                  offsetof(dti_session_options, kv_dtype) + sizeof(std::int32_t),
              "dti_session_options v3 layout changed");

namespace detinfer::capi {
namespace {

// Copies the caller's version of a struct over the defaults in *out: the fields its
// version lacks keep their defaults. Accepts exactly the sizes of released versions.
template <typename T>
dti_status read_versioned(const char* function, const char* type, const T& in,
                          std::initializer_list<std::uint32_t> sizes, T* out) {
  bool known = false;
  std::string list;
  for (std::uint32_t s : sizes) {
    known = known || in.struct_size == s;
    list += (list.empty() ? "" : ", ") + std::to_string(s);
  }
  if (!known) {
    return set_error(DTI_INVALID_ARGUMENT, std::string(function) + ": " + type +
                                               ".struct_size is " + std::to_string(in.struct_size) +
                                               ", expected one of " + list +
                                               " (initialize it with " + type + "_default())");
  }
  std::memcpy(static_cast<void*>(out), &in, in.struct_size);
  out->struct_size = sizeof(T);
  return DTI_OK;
}

// One range rule of dti_session_options: `field` must lie in [lo, hi].
struct RangeRule {
  const char* field;
  std::int64_t value;
  std::int64_t lo;
  std::int64_t hi;
  const char* meaning;
};

dti_status check_ranges(const char* function, std::initializer_list<RangeRule> rules) {
  for (const RangeRule& r : rules) {
    if (r.value < r.lo || r.value > r.hi) {
      return set_error(DTI_INVALID_ARGUMENT, std::string(function) + ": dti_session_options." +
                                                 r.field + " must be " + r.meaning + ", got " +
                                                 std::to_string(r.value));
    }
  }
  return DTI_OK;
}

// Calls f(C member, C++ member) for the rows of the SessionOptions table that the C struct
// carries as a plain copy (CField::kCopy; a bool is 0/1 in C); both conversions walk it.
template <typename C, typename Cxx, typename F>
void for_each_plain_option(C& c, Cxx& s, F&& f) {
#define DETINFER_C_COPY_kCopy(c_member, member) f(c.c_member, s.member);
#define DETINFER_C_COPY_kCustom(c_member, member)
#define DETINFER_C_COPY_kNone(c_member, member)
#define DETINFER_C_COPY(member, key, flag, how, c_member, ...) \
  DETINFER_C_COPY_##how(c_member, member)
  DETINFER_SESSION_FIELDS(DETINFER_C_COPY)
#undef DETINFER_C_COPY
#undef DETINFER_C_COPY_kNone
#undef DETINFER_C_COPY_kCustom
#undef DETINFER_C_COPY_kCopy
}

// A copied row's C member has the C++ member's type (a bool is an int32_t 0/1).
template <typename Cxx>
using CType = std::conditional_t<std::is_same_v<Cxx, bool>, std::int32_t, Cxx>;
#define DETINFER_C_TYPE_kCopy(c_member, member)                                         \
  static_assert(std::is_same_v<decltype(dti_session_options::c_member),                 \
                               CType<std::decay_t<decltype(SessionOptions{}.member)>>>, \
                "dti_session_options." #c_member " must have the type of " #member);
#define DETINFER_C_TYPE_kCustom(c_member, member)
#define DETINFER_C_TYPE_kNone(c_member, member)
#define DETINFER_C_TYPE(member, key, flag, how, c_member, ...) \
  DETINFER_C_TYPE_##how(c_member, member)
DETINFER_SESSION_FIELDS(DETINFER_C_TYPE)
#undef DETINFER_C_TYPE

// The rows converted by hand (to_session_options, from_session_options, the memory tier):
// a new kCustom row fails here until its conversion is written.
constexpr int custom_rows() {
  int n = 0;
  for (const session::SessionFieldSpec& f : session::kSessionFields)
    n += f.c_field == session::CField::kCustom ? 1 : 0;
  return n;
}
static_assert(custom_rows() == 11, "a new kCustom SessionOptions row needs its C conversion here");

// The members that need more than a copy: the memory tier (-1 = off) and the strings.
void to_cache_options(const dti_session_options& c, SessionOptions* out) {
  CacheOptions& cache = out->cache;
  cache.prefix.memory.enabled = c.prefix_cache_memory_bytes >= 0;
  if (c.prefix_cache_memory_bytes > 0) {
    cache.prefix.memory.budget_bytes = c.prefix_cache_memory_bytes;
  }
  if (c.disk_cache_dir != nullptr) cache.prefix.disk.directory = c.disk_cache_dir;
  if (c.redis_host != nullptr) cache.redis.host = c.redis_host;
  if (c.cache_salt != nullptr) out->cache_salt = c.cache_salt;
  if (c.draft_model != nullptr) out->draft_model_path = c.draft_model;
  if (c.weights != nullptr) out->weights = c.weights;
}

}  // namespace

dti_status to_session_options(const char* fn, const dti_session_options* in, SessionOptions* out) {
  dti_session_options c = dti_session_options_default();
  if (in != nullptr) {
    if (dti_status s = read_versioned(
            fn, "dti_session_options", *in,
            {DTI_SESSION_OPTIONS_SIZE_V1, DTI_SESSION_OPTIONS_SIZE_V2, DTI_SESSION_OPTIONS_SIZE_V3,
             DTI_SESSION_OPTIONS_SIZE_V4, sizeof(dti_session_options)},
            &c);
        s != DTI_OK) {
      return s;
    }
  }
  if (dti_status s = check_ranges(
          fn, {{"mode", c.mode, 0, 1, "0 (canonical) or 1 (fast)"},
               {"log_level", c.log_level, -1, 6, "in [-1, 6]"},
               {"kv_dtype", c.kv_dtype, 0, 2, "0 (f32), 1 (bf16) or 2 (f16)"},
               {"fingerprint_level", c.fingerprint_level, 0, 2, "0 (off), 1 (final) or 2 (steps)"},
               {"prefix_cache_memory_bytes", c.prefix_cache_memory_bytes, -1, INT64_MAX,
                ">= -1 (-1 = no memory tier, 0 = auto)"}});
      s != DTI_OK) {
    return s;
  }
  // The session's own recorder fills GenerationResult::fingerprint_json (in memory).
  out->recorder.level = static_cast<RecordLevel>(c.fingerprint_level);
  out->mode = c.mode == DTI_MODE_FAST ? NumericsMode::kFast : NumericsMode::kCanonical;
  for_each_plain_option(c, *out, [](const auto& from, auto& to) {
    to = static_cast<std::decay_t<decltype(to)>>(from);
  });
  out->kv_dtype = static_cast<KvDType>(c.kv_dtype);
  if (c.log_level >= 0) out->log_level = static_cast<LogLevel>(c.log_level);
  to_cache_options(c, out);
  return DTI_OK;
}

dti_status from_session_options(const SessionOptions& in, dti_session_options* out) {
  if (in.mode == NumericsMode::kDeviceInvariant) {
    return set_error(DTI_INVALID_ARGUMENT, "mode device_invariant has no dti_numerics_mode");
  }
  if (in.recorder.level == RecordLevel::kLogits) {
    return set_error(DTI_INVALID_ARGUMENT, "fingerprint level logits has no C code");
  }
  out->mode = in.mode == NumericsMode::kFast ? DTI_MODE_FAST : DTI_MODE_CANONICAL;
  out->log_level = in.log_level ? static_cast<int32_t>(*in.log_level) : -1;
  out->fingerprint_level = static_cast<int32_t>(in.recorder.level);
  out->kv_dtype = static_cast<int32_t>(in.kv_dtype);
  for_each_plain_option(*out, in, [](auto& to, const auto& from) {
    to = static_cast<std::decay_t<decltype(to)>>(from);
  });
  const CacheOptions& cache = in.cache;
  out->prefix_cache_memory_bytes =
      cache.prefix.memory.enabled ? cache.prefix.memory.budget_bytes : -1;
  auto c_string = [](const std::string& s) { return s.empty() ? nullptr : s.c_str(); };
  out->disk_cache_dir = c_string(cache.prefix.disk.directory);
  out->redis_host = c_string(cache.redis.host);
  out->cache_salt = c_string(in.cache_salt);
  out->draft_model = c_string(in.draft_model_path);
  out->weights = in.weights == "native" ? nullptr : c_string(in.weights);
  return DTI_OK;
}

// The table's scalar fields have members of the same names and matching types in
// dti_generation_config (a bool is an int32_t 0/1); a table field missing from the C
// struct fails to compile here.
#define DETINFER_C_FIELD_TYPE(member, ...)                                 \
  static_assert(std::is_same_v<decltype(dti_generation_config::member),    \
                               CType<decltype(GenerationConfig::member)>>, \
                "dti_generation_config." #member " must have GenerationConfig's type");
DETINFER_GENERATION_SCALAR_FIELDS(DETINFER_C_FIELD_TYPE)
#undef DETINFER_C_FIELD_TYPE
// The other fields (seed, stop_token_ids, stop_strings, response_format) are converted
// by hand below.
#define DETINFER_COUNT_C_FIELD(...) +1
static_assert(0 DETINFER_GENERATION_OTHER_FIELDS(DETINFER_COUNT_C_FIELD) == 4,
              "a new non-scalar GenerationConfig field needs its C conversion here");
#undef DETINFER_COUNT_C_FIELD

namespace {

// The lists of the C struct (NULL pointers with nonzero counts are errors).
dti_status lists_to_cxx(const char* function, const dti_generation_config& c,
                        GenerationConfig* out) {
  if (c.stop_token_ids != nullptr) {
    out->stop_token_ids.emplace(c.stop_token_ids, c.stop_token_ids + c.num_stop_token_ids);
  } else if (c.num_stop_token_ids != 0) {
    return set_error(DTI_INVALID_ARGUMENT,
                     std::string(function) + ": stop_token_ids is NULL but num_stop_token_ids is " +
                         std::to_string(c.num_stop_token_ids));
  }
  if (c.num_stop_strings != 0 && c.stop_strings == nullptr) {
    return null_argument(function, "stop_strings");
  }
  out->stop_strings.clear();
  for (std::size_t i = 0; i < c.num_stop_strings; ++i) {
    if (c.stop_strings[i] == nullptr) {
      return set_error(DTI_INVALID_ARGUMENT,
                       std::string(function) + ": stop_strings[" + std::to_string(i) + "] is NULL");
    }
    out->stop_strings.emplace_back(c.stop_strings[i]);
  }
  return DTI_OK;
}

dti_status format_to_cxx(const char* function, const dti_generation_config& c,
                         GenerationConfig* out) {
  if (c.response_format < DTI_RESPONSE_TEXT || c.response_format > DTI_RESPONSE_JSON_SCHEMA) {
    return set_error(DTI_INVALID_ARGUMENT,
                     std::string(function) +
                         ": response_format must be 0 (text), 1 (json_object) "
                         "or 2 (json_schema), got " +
                         std::to_string(c.response_format));
  }
  out->response_format.type = static_cast<ResponseFormatType>(c.response_format);
  out->response_format.json_schema.clear();
  if (c.response_format == DTI_RESPONSE_JSON_SCHEMA) {
    if (c.json_schema == nullptr) return null_argument(function, "json_schema");
    out->response_format.json_schema = c.json_schema;
  } else if (c.json_schema != nullptr) {
    return set_error(DTI_INVALID_ARGUMENT, std::string(function) +
                                               ": json_schema must be NULL unless "
                                               "response_format is DTI_RESPONSE_JSON_SCHEMA");
  }
  return DTI_OK;
}

}  // namespace

dti_status to_generation_config(const char* function, const dti_generation_config* in,
                                GenerationConfig* out) {
  if (in == nullptr) return DTI_OK;  // defaults
  dti_generation_config c = dti_generation_config_default();
  if (dti_status s = read_versioned(function, "dti_generation_config", *in,
                                    {DTI_GENERATION_CONFIG_SIZE_V1, DTI_GENERATION_CONFIG_SIZE_V2,
                                     DTI_GENERATION_CONFIG_SIZE_V3, DTI_GENERATION_CONFIG_SIZE_V4},
                                    &c);
      s != DTI_OK) {
    return s;
  }
#define DETINFER_C_TO_CXX(member, ...) \
  out->member = static_cast<decltype(GenerationConfig::member)>(c.member);
  DETINFER_GENERATION_SCALAR_FIELDS(DETINFER_C_TO_CXX)
#undef DETINFER_C_TO_CXX
  out->seed = c.has_seed != 0 ? std::optional<std::uint64_t>(c.seed) : std::nullopt;
  if (dti_status s = format_to_cxx(function, c, out); s != DTI_OK) return s;
  return lists_to_cxx(function, c, out);
}

void from_generation_config(const GenerationConfig& in, dti_generation_config* out) {
#define DETINFER_CXX_TO_C(member, ...) \
  out->member = static_cast<decltype(dti_generation_config::member)>(in.member);
  DETINFER_GENERATION_SCALAR_FIELDS(DETINFER_CXX_TO_C)
#undef DETINFER_CXX_TO_C
  out->has_seed = in.seed.has_value() ? 1 : 0;
  out->seed = in.seed.value_or(0);
  out->response_format = static_cast<std::int32_t>(in.response_format.type);
  out->json_schema = nullptr;  // a C caller sets its own text
}

TokenCallback to_callback(dti_token_callback cb, void* user_data) {
  if (cb == nullptr) return {};
  return [cb, user_data](const TokenEvent& e) {
    return cb(user_data, e.token, e.text.c_str(), e.text.size(), e.sample_index, e.step) != 0;
  };
}

}  // namespace detinfer::capi

extern "C" {

dti_session_options dti_session_options_default(void) {
  static const detinfer::SessionOptions d;  // its strings are "": every C string is NULL
  dti_session_options o{};
  o.struct_size = sizeof(dti_session_options);
  detinfer::capi::from_session_options(d, &o);  // the C++ defaults are representable
  return o;
}

dti_generation_config dti_generation_config_default(void) {
  dti_generation_config c{};
  c.struct_size = sizeof(dti_generation_config);
  detinfer::capi::from_generation_config(detinfer::GenerationConfig{}, &c);
  return c;
}

}  // extern "C"
