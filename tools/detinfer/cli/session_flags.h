// One table of every option a `detinfer` tool hands to its DeterministicSession (the
// library's SessionOptions field table, src/session/session_fields.h, plus the fingerprint
// log and the server's seed and consistency policy): each row has a config key, a
// command-line flag, a type, a default and a help line. The table drives the
// flags, the `--config FILE` schema (JSON; flags override the file) and `--print-config`
// (docs/cli.md, "Session options"). Used by serve, generate, consistency and bench.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "detinfer/session.h"
#include "serve_auth.h"

namespace detinfer_cli {

// The fingerprint log: the session's RunFingerprint JSON lines appended to a file that
// is rotated by size (FILE -> FILE.1 -> ... -> FILE.<keep>; the oldest is deleted).
struct FingerprintLogOptions {
  std::string path;                     // empty = no log
  std::int64_t max_bytes = 64LL << 20;  // rotate before a line would pass this (64 MiB)
  std::int32_t keep = 5;                // rotated files kept: FILE.1 .. FILE.<keep>
};

// What `detinfer serve` does with seeds and with a falling consistency ratio
// (docs/server.md, "Policies").
struct ServePolicyOptions {
  bool require_seed = false;              // sampled requests without "seed" get 400 naming seed
  double default_temperature = 1;         // for requests that omit "temperature" (OpenAI: 1)
  double fail_below = 0.99;               // consistency ratio below this: /health 503
  bool exit_on_inconsistency = false;     // ... and drain, then exit with code 3
  std::string expect_system_fingerprint;  // refuse to start when ours differs ("" = any)
};

struct ToolConfig {
  detinfer::SessionOptions session;
  FingerprintLogOptions fingerprint_log;
  ServePolicyOptions policy;
  ApiKeyOptions auth;  // serve only; keys themselves only from --api-key (never printed)
};

enum class FieldType : std::uint8_t { kBool, kInt, kDouble, kString, kEnum };

struct ConfigField {
  std::string key;   // config file key, dotted: "cache.prefix.memory.budget_bytes"
  std::string flag;  // "--prefix-cache-memory-bytes" (bools also get --no-...)
  FieldType type;
  std::string help;
  bool serve_only;  // meaningful only to `detinfer serve`
  std::function<nlohmann::json(const ToolConfig&)> get;
  // Throws detinfer::Error(kInvalidArgument) naming the key for a value of the wrong type.
  std::function<void(ToolConfig&, const nlohmann::json&)> set;
};

// Every row, in documentation order: the library's SessionOptions table
// (session/session_fields.h) and the program's own rows (config_rows.cpp).
const std::vector<ConfigField>& config_fields();
// The serve-only rows auth.* (session_flags_auth.cpp; the keys themselves are flags only).
std::vector<ConfigField> api_key_rows();

// Throws detinfer::Error(kInvalidArgument) "<key>: <what>" naming `key`.
[[noreturn]] void config_error(const std::string& key, const std::string& what);

// Adds the table's flags (except `exclude`d keys, and serve-only rows unless
// `serve`) plus --config FILE and --print-config to `app`. After parsing, resolve()
// gives the configuration: defaults, then the file, then the flags given.
class SessionFlags {
 public:
  SessionFlags(CLI::App& app, bool serve, std::set<std::string> exclude = {});
  ToolConfig resolve() const;
  bool print_config() const { return print_config_; }
  // Prints the effective configuration of an opened session (auto values resolved) as
  // one JSON object on stdout.
  void print(const ToolConfig& config, const detinfer::DeterministicSession& session) const;
  // Whether a flag or the config file set `key`.
  bool given(const std::string& key) const;

 private:
  struct Flag {
    const ConfigField* field;
    CLI::Option* option;
    std::shared_ptr<std::string> text;
    std::shared_ptr<bool> on;
  };
  bool serve_;
  std::set<std::string> exclude_;
  std::vector<Flag> flags_;
  std::string config_file_;
  bool print_config_ = false;
  mutable std::set<std::string> given_;
};

// The configuration as one nested JSON object (every row the command uses).
nlohmann::json config_json(const ToolConfig& config, bool serve,
                           const std::set<std::string>& exclude = {});
// Applies a config file's object (nested or dotted keys) onto `config`. Unknown keys and
// wrong types throw Error(kInvalidArgument) naming the key and the file.
void apply_config_json(ToolConfig& config, const nlohmann::json& j, const std::string& file,
                       std::set<std::string>* given = nullptr);

}  // namespace detinfer_cli
