// The rows of the `detinfer` option table: every SessionOptions row of the library's field
// table (src/session/session_fields.h: key, flag, help line), plus the program's own rows
// (the fingerprint log and serve's policies). session_flags.cpp turns them into flags,
// `--config FILE` and `--print-config`.
#include <limits>
#include <optional>
#include <type_traits>

#include "detinfer/error.h"
#include "session/session_fields.h"
#include "session_flags.h"

namespace detinfer_cli {

using nlohmann::json;

void config_error(const std::string& key, const std::string& what) {
  throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument, key + ": " + what, key);
}

namespace {

template <class T>
constexpr FieldType type_of() {
  if constexpr (std::is_same_v<T, bool>) {
    return FieldType::kBool;
  } else if constexpr (std::is_integral_v<T>) {
    return FieldType::kInt;
  } else if constexpr (std::is_floating_point_v<T>) {
    return FieldType::kDouble;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return FieldType::kString;
  } else {
    return FieldType::kEnum;
  }
}

template <class T>
T convert_integer(const json& v, const std::string& key) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
      config_error(key, "out of range: " + v.dump());
    }
    return static_cast<T>(u);
  }
  if (!v.is_number_integer()) config_error(key, "expected an integer, got " + v.dump());
  const auto i = v.get<std::int64_t>();
  if (i < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
      (std::is_signed_v<T> && i > static_cast<std::int64_t>(std::numeric_limits<T>::max()))) {
    config_error(key, "out of range: " + v.dump());
  }
  return static_cast<T>(i);
}

template <class T>
T convert(const json& v, const std::string& key) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) config_error(key, "expected true or false, got " + v.dump());
    return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    return convert_integer<T>(v, key);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) config_error(key, "expected a number, got " + v.dump());
    return v.get<T>();
  } else {
    if (!v.is_string()) config_error(key, "expected a string, got " + v.dump());
    return v.get<std::string>();
  }
}

const char* const kLogLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};

// The names of an enum-valued member: to text, from text (throws the parser's Error), and
// the accepted names for messages.
std::string enum_text(detinfer::NumericsMode m) { return detinfer::to_string(m); }
std::string enum_text(detinfer::KvDType d) { return detinfer::to_string(d); }
std::string enum_text(detinfer::RecordLevel l) { return detinfer::to_string(l); }
std::string enum_text(const std::optional<detinfer::LogLevel>& l) {
  return l ? kLogLevels[static_cast<int>(*l)] : "";
}
void enum_parse(const std::string& v, detinfer::NumericsMode& m) {
  m = detinfer::parse_numerics_mode(v);
}
void enum_parse(const std::string& v, detinfer::KvDType& d) { d = detinfer::parse_kv_dtype(v); }
void enum_parse(const std::string& v, detinfer::RecordLevel& l) {
  l = detinfer::parse_record_level(v);
}
void enum_parse(const std::string& v, std::optional<detinfer::LogLevel>& l) {
  if (v.empty()) {
    l.reset();  // "" = keep DETINFER_LOG_LEVEL
  } else {
    l = detinfer::parse_log_level(v);
  }
}
const char* enum_names(detinfer::NumericsMode) { return "canonical, fast or device_invariant"; }
const char* enum_names(detinfer::KvDType) { return "f32, bf16 or f16"; }
const char* enum_names(detinfer::RecordLevel) { return "off, final, steps or logits"; }
const char* enum_names(const std::optional<detinfer::LogLevel>&) {
  return "trace, debug, info, warn, error, critical or off";
}

// A row bound to one member: `access` returns a reference into the configuration.
template <class Access>
ConfigField row(const char* key, const char* flag, const char* help, Access access,
                bool serve_only = false) {
  using T = std::remove_reference_t<decltype(access(std::declval<ToolConfig&>()))>;
  ConfigField f{key, flag, type_of<T>(), help, serve_only, {}, {}};
  const std::string k = key;
  if constexpr (type_of<T>() == FieldType::kEnum) {
    f.get = [access](const ToolConfig& c) {
      return json(enum_text(access(const_cast<ToolConfig&>(c))));
    };
    f.set = [access, k](ToolConfig& c, const json& v) {
      if (!v.is_string()) config_error(k, "expected a string, got " + v.dump());
      try {
        enum_parse(v.get<std::string>(), access(c));
      } catch (const detinfer::Error&) {
        config_error(
            k, std::string("expected ") + enum_names(access(c)) + ", got " + v.get<std::string>());
      }
    };
  } else {
    f.get = [access](const ToolConfig& c) { return json(access(const_cast<ToolConfig&>(c))); };
    f.set = [access, k](ToolConfig& c, const json& v) { access(c) = convert<T>(v, k); };
  }
  return f;
}

// The program's fingerprint log (after the fingerprint rows of the table).
void add_fingerprint_log_rows(std::vector<ConfigField>& t) {
  using C = ToolConfig;
  t.push_back(row(
      "fingerprint.log", "--fingerprint-log",
      "Append every request's fingerprint (JSON Lines) to this file",
      [](C & c) -> auto& { return c.fingerprint_log.path; }));
  t.push_back(row(
      "fingerprint.log_max_bytes", "--fingerprint-log-max-bytes",
      "Rotate the fingerprint log before it passes this size",
      [](C & c) -> auto& { return c.fingerprint_log.max_bytes; }));
  t.push_back(row(
      "fingerprint.log_keep", "--fingerprint-log-keep",
      "Rotated fingerprint logs kept (FILE.1 .. FILE.N)",
      [](C & c) -> auto& { return c.fingerprint_log.keep; }));
}

void add_serve_rows(std::vector<ConfigField>& t) {
  using C = ToolConfig;
  t.push_back(row(
      "consistency.fail_below", "--consistency-fail-below", "Ratio below which /health answers 503",
      [](C & c) -> auto& { return c.policy.fail_below; }, true));
  t.push_back(row(
      "consistency.exit_on_failure", "--exit-on-inconsistency",
      "Below fail_below: drain in-flight requests and exit with code 3",
      [](C & c) -> auto& { return c.policy.exit_on_inconsistency; }, true));
  t.push_back(row(
      "seed.require", "--require-seed", "Refuse sampled requests without a seed (400 naming seed)",
      [](C & c) -> auto& { return c.policy.require_seed; }, true));
  t.push_back(row(
      "seed.default_temperature", "--default-temperature",
      "Temperature of requests that omit it (0 = greedy)",
      [](C & c) -> auto& { return c.policy.default_temperature; }, true));
  t.push_back(row(
      "expect_system_fingerprint", "--expect-system-fingerprint",
      "Refuse to start unless our system_fingerprint equals this",
      [](C & c) -> auto& { return c.policy.expect_system_fingerprint; }, true));
}

std::vector<ConfigField> all_rows() {
  using C = ToolConfig;
  std::vector<ConfigField> t;
#define DETINFER_CLI_ROW(member, row_key, row_flag, c_field, c_member, lo, hi, row_doc) \
  t.push_back(row(                                                                      \
      row_key, row_flag, row_doc, [](C & c) -> auto& { return c.session.member; }));    \
  if (t.back().key == "fingerprint.store_prompt_tokens") add_fingerprint_log_rows(t);
  DETINFER_SESSION_FIELDS(DETINFER_CLI_ROW)
#undef DETINFER_CLI_ROW
  add_serve_rows(t);
  for (ConfigField& f : api_key_rows()) t.push_back(std::move(f));
  return t;
}

}  // namespace

const std::vector<ConfigField>& config_fields() {
  static const std::vector<ConfigField> fields = all_rows();
  return fields;
}

}  // namespace detinfer_cli
