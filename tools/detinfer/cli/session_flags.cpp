#include "session_flags.h"

#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <type_traits>

#include "core/json_reader.h"
#include "detinfer/error.h"

namespace detinfer_cli {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& key, const std::string& what) {
  throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument, key + ": " + what, key);
}

template <class T>
constexpr FieldType type_of() {
  if constexpr (std::is_same_v<T, bool>) {
    return FieldType::kBool;
  } else if constexpr (std::is_integral_v<T>) {
    return FieldType::kInt;
  } else if constexpr (std::is_floating_point_v<T>) {
    return FieldType::kDouble;
  } else {
    return FieldType::kString;
  }
}

template <class T>
T convert(const json& v, const std::string& key) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) bad(key, "expected true or false, got " + v.dump());
    return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
        bad(key, "out of range: " + v.dump());
      }
      return static_cast<T>(u);
    }
    if (!v.is_number_integer()) bad(key, "expected an integer, got " + v.dump());
    const auto i = v.get<std::int64_t>();
    if (i < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
        (std::is_signed_v<T> && i > static_cast<std::int64_t>(std::numeric_limits<T>::max()))) {
      bad(key, "out of range: " + v.dump());
    }
    return static_cast<T>(i);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) bad(key, "expected a number, got " + v.dump());
    return v.get<T>();
  } else {
    if (!v.is_string()) bad(key, "expected a string, got " + v.dump());
    return v.get<std::string>();
  }
}

// A row bound to one member: `access` returns a reference into the configuration.
template <class Access>
ConfigField row(const char* key, const char* flag, const char* help, Access access,
                bool serve_only = false) {
  using T = std::remove_reference_t<decltype(access(std::declval<ToolConfig&>()))>;
  ConfigField f{key, flag, type_of<T>(), help, serve_only, {}, {}};
  f.get = [access](const ToolConfig& c) { return json(access(const_cast<ToolConfig&>(c))); };
  const std::string k = key;
  f.set = [access, k](ToolConfig& c, const json& v) { access(c) = convert<T>(v, k); };
  return f;
}

// A row whose value is one of a few names.
ConfigField enum_row(const char* key, const char* flag, const char* help,
                     std::function<std::string(const ToolConfig&)> get,
                     std::function<void(ToolConfig&, const std::string&)> set) {
  ConfigField f{key, flag, FieldType::kEnum, help, false, {}, {}};
  f.get = [get](const ToolConfig& c) { return json(get(c)); };
  const std::string k = key;
  f.set = [set, k](ToolConfig& c, const json& v) {
    if (!v.is_string()) bad(k, "expected a string, got " + v.dump());
    set(c, v.get<std::string>());
  };
  return f;
}

const char* const kLogLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};

std::vector<ConfigField> session_rows() {
  using C = ToolConfig;
  std::vector<ConfigField> t;
  t.push_back(enum_row(
      "mode", "--mode", "Numerics mode: canonical | fast | device_invariant",
      [](const C& c) { return std::string(detinfer::to_string(c.session.mode)); },
      [](C& c, const std::string& v) {
        try {
          c.session.mode = detinfer::parse_numerics_mode(v);
        } catch (const detinfer::Error&) {
          bad("mode", "expected canonical, fast or device_invariant, got " + v);
        }
      }));
  t.push_back(row(
      "device", "--device", "cpu | cuda | cuda:N (weights, KV cache, kernels)",
      [](C & c) -> auto& { return c.session.device; }));
  t.push_back(enum_row(
      "kv_dtype", "--kv-dtype", "KV cache storage: f32 | bf16 | f16 (nearest-even, 2 bytes)",
      [](const C& c) { return std::string(detinfer::to_string(c.session.kv_dtype)); },
      [](C& c, const std::string& v) {
        try {
          c.session.kv_dtype = detinfer::parse_kv_dtype(v);
        } catch (const detinfer::Error&) {
          bad("kv_dtype", "expected f32, bf16 or f16, got " + v);
        }
      }));
  t.push_back(row(
      "threads", "--threads", "Kernel threads 1..1024 (0 = all cores)",
      [](C & c) -> auto& { return c.session.threads; }));
  t.push_back(row(
      "kv_budget_bytes", "--kv-budget-bytes",
      "KV pool bytes (0 = sized from the model and memory); bf16/f16 KV: 2x the tokens",
      [](C & c) -> auto& { return c.session.kv_budget_bytes; }));
  t.push_back(row(
      "kv_block_size", "--kv-block-size", "Tokens per KV block 1..1024",
      [](C & c) -> auto& { return c.session.kv_block_size; }));
  t.push_back(row(
      "max_batch", "--max-batch", "Sequences decoded per step 1..4096",
      [](C & c) -> auto& { return c.session.max_batch; }));
  t.push_back(row(
      "prefill_chunk_tokens", "--prefill-chunk-tokens", "Prompt tokens per step 1..1048576",
      [](C & c) -> auto& { return c.session.prefill_chunk_tokens; }));
  t.push_back(row(
      "max_queue", "--max-queue", "Waiting requests before refusal 1..1048576",
      [](C & c) -> auto& { return c.session.max_queue; }));
  t.push_back(enum_row(
      "log_level", "--log-level",
      "trace | debug | info | warn | error | critical | off (\"\" = DETINFER_LOG_LEVEL)",
      [](const C& c) {
        return c.session.log_level ? kLogLevels[static_cast<int>(*c.session.log_level)] : "";
      },
      [](C& c, const std::string& v) {
        if (v.empty()) {
          c.session.log_level.reset();
          return;
        }
        try {
          c.session.log_level = detinfer::parse_log_level(v);
        } catch (const detinfer::Error&) {
          bad("log_level", "expected trace, debug, info, warn, error, critical or off, got " + v);
        }
      }));
  t.push_back(row(
      "cache_salt", "--cache-salt", "Mixed into every prefix-cache key",
      [](C & c) -> auto& { return c.session.cache_salt; }));
  return t;
}

std::vector<ConfigField> prefix_cache_rows() {
  using C = ToolConfig;
  std::vector<ConfigField> t;
  t.push_back(row(
      "cache.prefix.enabled", "--prefix-cache", "KV-prefix cache on/off",
      [](C & c) -> auto& { return c.session.cache.prefix.enabled; }));
  t.push_back(row(
      "cache.prefix.memory.enabled", "--prefix-cache-memory", "Memory tier of the prefix cache",
      [](C & c) -> auto& { return c.session.cache.prefix.memory.enabled; }));
  t.push_back(row(
      "cache.prefix.memory.budget_bytes", "--prefix-cache-memory-bytes",
      "Memory tier bytes (0 = 20% of the memory limit)",
      [](C & c) -> auto& { return c.session.cache.prefix.memory.budget_bytes; }));
  t.push_back(row(
      "cache.prefix.memory.ttl_seconds", "--prefix-cache-ttl",
      "Memory tier TTL in seconds (0 = none)",
      [](C & c) -> auto& { return c.session.cache.prefix.memory.ttl_seconds; }));
  t.push_back(row(
      "cache.prefix.disk.directory", "--cache-dir", "Disk tier folder (\"\" = no disk tier)",
      [](C & c) -> auto& { return c.session.cache.prefix.disk.directory; }));
  t.push_back(row(
      "cache.prefix.disk.budget_bytes", "--cache-dir-bytes", "Disk tier bytes",
      [](C & c) -> auto& { return c.session.cache.prefix.disk.budget_bytes; }));
  t.push_back(row(
      "cache.prefix.redis.enabled", "--prefix-cache-redis",
      "Redis tier of the prefix cache (needs --redis-host)",
      [](C & c) -> auto& { return c.session.cache.prefix.redis.enabled; }));
  t.push_back(row(
      "cache.prefix.redis.ttl_seconds", "--prefix-cache-redis-ttl",
      "Redis tier TTL in seconds (>= 1)",
      [](C & c) -> auto& { return c.session.cache.prefix.redis.ttl_seconds; }));
  t.push_back(row(
      "cache.prefix.redis.key_prefix", "--prefix-cache-redis-prefix",
      "Redis key prefix of KV blocks",
      [](C & c) -> auto& { return c.session.cache.prefix.redis.key_prefix; }));
  t.push_back(row(
      "cache.prefix.error_log_interval_seconds", "--cache-error-log-interval",
      "A failing tier logs at most once per this many seconds",
      [](C & c) -> auto& { return c.session.cache.prefix.error_log_interval_seconds; }));
  return t;
}

std::vector<ConfigField> result_cache_rows() {
  using C = ToolConfig;
  std::vector<ConfigField> t;
  t.push_back(row(
      "cache.result.enabled", "--result-cache",
      "Result cache (canonical, fully deterministic requests)",
      [](C & c) -> auto& { return c.session.cache.result.enabled; }));
  t.push_back(row(
      "cache.result.memory_budget_bytes", "--result-cache-bytes", "Result cache memory bytes",
      [](C & c) -> auto& { return c.session.cache.result.memory_budget_bytes; }));
  t.push_back(row(
      "cache.result.ttl_seconds", "--result-cache-ttl", "Result cache TTL in seconds (0 = none)",
      [](C & c) -> auto& { return c.session.cache.result.ttl_seconds; }));
  t.push_back(row(
      "cache.result.use_redis", "--result-cache-redis",
      "Also store results in Redis (needs --redis-host)",
      [](C & c) -> auto& { return c.session.cache.result.use_redis; }));
  t.push_back(row(
      "cache.result.redis_key_prefix", "--result-cache-redis-prefix", "Redis key prefix of results",
      [](C & c) -> auto& { return c.session.cache.result.redis_key_prefix; }));
  t.push_back(row(
      "cache.result.audit_fraction", "--result-cache-audit",
      "Fraction [0, 1] of result-cache hits recomputed and compared",
      [](C & c) -> auto& { return c.session.cache.result.audit_fraction; }));
  t.push_back(row(
      "cache.redis.host", "--redis-host", "Redis host (\"\" = no Redis)",
      [](C & c) -> auto& { return c.session.cache.redis.host; }));
  t.push_back(row(
      "cache.redis.port", "--redis-port", "Redis port",
      [](C & c) -> auto& { return c.session.cache.redis.port; }));
  t.push_back(row(
      "cache.redis.connect_timeout_ms", "--redis-connect-timeout-ms", "Per connection attempt",
      [](C & c) -> auto& { return c.session.cache.redis.connect_timeout_ms; }));
  t.push_back(row(
      "cache.redis.command_timeout_ms", "--redis-command-timeout-ms", "Per GET/SET/DEL",
      [](C & c) -> auto& { return c.session.cache.redis.command_timeout_ms; }));
  t.push_back(row(
      "cache.redis.reconnect_backoff_min_ms", "--redis-backoff-min-ms",
      "First wait after a Redis failure",
      [](C & c) -> auto& { return c.session.cache.redis.reconnect_backoff_min_ms; }));
  t.push_back(row(
      "cache.redis.reconnect_backoff_max_ms", "--redis-backoff-max-ms",
      "Longest wait after Redis failures",
      [](C & c) -> auto& { return c.session.cache.redis.reconnect_backoff_max_ms; }));
  return t;
}

std::vector<ConfigField> observability_rows() {
  using C = ToolConfig;
  std::vector<ConfigField> t;
  t.push_back(enum_row(
      "fingerprint.level", "--fingerprint-level", "Fingerprint level: off | final | steps | logits",
      [](const C& c) { return detinfer::to_string(c.session.recorder.level); },
      [](C& c, const std::string& v) {
        try {
          c.session.recorder.level = detinfer::parse_record_level(v);
        } catch (const detinfer::Error&) {
          bad("fingerprint.level", "expected off, final, steps or logits, got " + v);
        }
      }));
  t.push_back(row(
      "fingerprint.store_prompt_tokens", "--fingerprint-prompt-tokens",
      "Fingerprints keep the prompt ids (else only their hash)",
      [](C & c) -> auto& { return c.session.recorder.store_prompt_tokens; }));
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
  t.push_back(row(
      "distribution.interval", "--distribution-interval",
      "Top-1 probability/entropy metrics of every Nth token (0 = off)",
      [](C & c) -> auto& { return c.session.distribution_interval; }));
  t.push_back(row(
      "distribution.window", "--distribution-window",
      "Sampled tokens the top-1 variance gauge covers",
      [](C & c) -> auto& { return c.session.distribution_window; }));
  t.push_back(row(
      "consistency.enabled", "--consistency-monitor",
      "Shadow-replay a sample of requests and track the consistency ratio",
      [](C & c) -> auto& { return c.session.consistency.enabled; }));
  t.push_back(row(
      "consistency.sample_rate", "--consistency-sample-rate",
      "Fraction [0, 1] of requests replayed",
      [](C & c) -> auto& { return c.session.consistency.monitor.sample_rate; }));
  t.push_back(row(
      "consistency.sampling_salt", "--consistency-sampling-salt",
      "Salt of the deterministic sample",
      [](C & c) -> auto& { return c.session.consistency.monitor.sampling_salt; }));
  t.push_back(row(
      "consistency.alert_below", "--consistency-alert-below",
      "Ratio below which the monitor alerts (metric, log, alarm)",
      [](C & c) -> auto& { return c.session.consistency.monitor.threshold; }));
  t.push_back(row(
      "consistency.min_checks", "--consistency-min-checks", "Checks before any alert or failure",
      [](C & c) -> auto& { return c.session.consistency.monitor.min_checks; }));
  t.push_back(row(
      "consistency.queue_capacity", "--consistency-queue",
      "Sampled requests waiting for replay before dropping",
      [](C & c) -> auto& { return c.session.consistency.monitor.queue_capacity; }));
  t.push_back(row(
      "consistency.low_priority", "--consistency-low-priority", "Replay at idle CPU priority",
      [](C & c) -> auto& { return c.session.consistency.monitor.low_priority; }));
  return t;
}

std::vector<ConfigField> serve_rows() {
  using C = ToolConfig;
  std::vector<ConfigField> t;
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
  return t;
}

json text_to_json(const ConfigField& f, const std::string& text) {
  switch (f.type) {
    case FieldType::kInt: {
      char* end = nullptr;
      errno = 0;
      if (!text.empty() && text[0] != '-') {
        const unsigned long long u = std::strtoull(text.c_str(), &end, 10);
        if (errno == 0 && end && *end == '\0' && end != text.c_str()) return json(u);
      } else {
        const long long i = std::strtoll(text.c_str(), &end, 10);
        if (errno == 0 && end && *end == '\0' && end != text.c_str()) return json(i);
      }
      bad(f.flag, "expected an integer, got '" + text + "'");
    }
    case FieldType::kDouble: {
      char* end = nullptr;
      const double d = std::strtod(text.c_str(), &end);
      if (text.empty() || !end || *end != '\0') {
        bad(f.flag, "expected a number, got '" + text + "'");
      }
      return json(d);
    }
    default:
      return json(text);
  }
}

bool set_from_tree(ToolConfig& config, const json& j, const std::string& prefix,
                   const std::string& file, std::set<std::string>* given) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    const ConfigField* match = nullptr;
    bool is_parent = false;
    for (const auto& f : config_fields()) {
      if (f.key == key) match = &f;
      if (f.key.rfind(key + ".", 0) == 0) is_parent = true;
    }
    if (match) {
      try {
        match->set(config, it.value());
      } catch (const detinfer::Error& e) {
        throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument, file + ": " + e.message(),
                              key);
      }
      if (given) given->insert(key);
    } else if (is_parent && it.value().is_object()) {
      set_from_tree(config, it.value(), key, file, given);
    } else {
      throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                            file + ": unknown configuration key '" + key + "'", key);
    }
  }
  return true;
}

bool applies(const ConfigField& f, bool serve, const std::set<std::string>& exclude) {
  return (serve || !f.serve_only) && exclude.count(f.key) == 0;
}

}  // namespace

const std::vector<ConfigField>& config_fields() {
  static const std::vector<ConfigField> fields = [] {
    std::vector<ConfigField> all;
    for (auto part : {session_rows(), prefix_cache_rows(), result_cache_rows(),
                      observability_rows(), serve_rows()}) {
      for (auto& f : part) all.push_back(std::move(f));
    }
    return all;
  }();
  return fields;
}

json config_json(const ToolConfig& config, bool serve, const std::set<std::string>& exclude) {
  json out = json::object();
  for (const auto& f : config_fields()) {
    if (!applies(f, serve, exclude)) continue;
    out[json::json_pointer("/" + [&] {
      std::string p = f.key;
      for (auto& ch : p) {
        if (ch == '.') ch = '/';
      }
      return p;
    }())] = f.get(config);
  }
  return out;
}

void apply_config_json(ToolConfig& config, const json& j, const std::string& file,
                       std::set<std::string>* given) {
  if (!j.is_object()) {
    throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                          file + ": the configuration must be one JSON object");
  }
  set_from_tree(config, j, "", file, given);
}

SessionFlags::SessionFlags(CLI::App& app, bool serve, std::set<std::string> exclude)
    : serve_(serve), exclude_(std::move(exclude)) {
  const ToolConfig defaults;
  for (const auto& f : config_fields()) {
    if (!applies(f, serve_, exclude_)) continue;
    Flag flag{&f, nullptr, std::make_shared<std::string>(), std::make_shared<bool>(false)};
    const std::string dflt = f.get(defaults).dump();
    const std::string help = f.help + " [config: " + f.key + ", default " + dflt + "]";
    if (f.type == FieldType::kBool) {
      const std::string names = f.flag + ",!--no-" + f.flag.substr(2);
      flag.option = app.add_flag(names, *flag.on, help);
    } else {
      flag.option = app.add_option(f.flag, *flag.text, help);
    }
    flags_.push_back(flag);
  }
  app.add_option("--config", config_file_,
                 "JSON configuration file (keys as in --print-config); flags override it");
  app.add_flag("--print-config", print_config_,
               "Print the effective configuration (JSON, auto values resolved) and exit");
}

ToolConfig SessionFlags::resolve() const {
  ToolConfig c;
  given_.clear();
  if (!config_file_.empty()) {
    // The hardened reader every parse site uses: size, depth, UTF-8, duplicate keys.
    const std::string text = detinfer::core::read_file_bounded(config_file_, 1u << 20, "config");
    detinfer::core::JsonLimits limits;
    limits.max_bytes = 1u << 20;
    limits.max_depth = 16;
    const json j =
        detinfer::core::parse_json(text, limits, detinfer::ErrorCode::kInvalidArgument, "config");
    apply_config_json(c, j, config_file_, &given_);
    for (const auto& key : given_) {
      for (const auto& f : config_fields()) {
        if (f.key == key && !applies(f, serve_, exclude_)) {
          throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                                config_file_ + ": '" + key + "' does not apply to this command",
                                key);
        }
      }
    }
  }
  for (const auto& flag : flags_) {
    if (flag.option->count() == 0) continue;
    const json v = flag.field->type == FieldType::kBool ? json(*flag.on)
                                                        : text_to_json(*flag.field, *flag.text);
    flag.field->set(c, v);
    given_.insert(flag.field->key);
  }
  return c;
}

bool SessionFlags::given(const std::string& key) const { return given_.count(key) != 0; }

void SessionFlags::print(const ToolConfig& config,
                         const detinfer::DeterministicSession& session) const {
  ToolConfig effective = config;
  effective.session = session.options();
  std::cout << config_json(effective, serve_, exclude_).dump(2) << "\n";
}

}  // namespace detinfer_cli
