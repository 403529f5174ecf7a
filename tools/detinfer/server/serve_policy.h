// The policies of `detinfer serve` that sit between the HTTP transport and the session
// (docs/server.md, "Policies"): the seed policy (--require-seed, --default-temperature,
// seeds counted by source and logged), the fleet fingerprint check
// (X-Detinfer-Expect-Fingerprint -> 421) and the two-level consistency policy (alert
// below alert_below; /health 503, and optionally exit, below fail_below).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "detinfer/consistency_monitor.h"
#include "detinfer/generation.h"
#include "detinfer/metrics.h"
#include "detinfer/session.h"
#include "http/http_message.h"
#include "openai_protocol.h"
#include "serve_metrics.h"
#include "serve_request.h"
#include "session_flags.h"

namespace detinfer_cli {

// Exit code of `detinfer serve` after --exit-on-inconsistency stopped it.
constexpr int kExitInconsistent = 3;
// Exit code when --expect-system-fingerprint differs from this replica's.
constexpr int kExitFingerprintMismatch = 4;

// The requests that run on the HTTP server's quick workers (ServerOptions::is_quick): GET
// and HEAD of /health and /metrics, so that probes and scrapes never wait behind
// --http-threads long completions.
bool is_probe_request(const detinfer_http::Request& r);

enum class SeedSource : std::uint8_t { kGiven, kDrawn, kDefault };
const char* to_string(SeedSource s);

// Applies --default-temperature (when `temperature_defaulted`: the request's temperature
// is the API default, set neither by the client nor by the model's generation_config.json;
// ServeRequest::sources says) and --require-seed to a parsed request. Returns the 400 to
// send, naming "seed", or nullopt; `source` says where the request's seed will come from.
std::optional<ApiError> apply_seed_policy(const ServePolicyOptions& policy,
                                          bool temperature_defaulted,
                                          detinfer::GenerationConfig& config, SeedSource* source);

// The 421 to send when a request expects another system_fingerprint (header value
// non-empty and different from `ours`), else nullopt.
std::optional<ApiError> check_expected_fingerprint(const std::string& expected,
                                                   const std::string& ours);

// XXH3-64 (16 hex digits) of the build and machine facts of collect_environment() and the
// fingerprint-relevant environment variables: logged with every request's seed.
std::string environment_hash();

// Per-request facts the server counts and logs: seeds by source, and one info line with
// request id, seed, source and environment hash.
class SeedLog {
 public:
  explicit SeedLog(detinfer::MetricsRegistry& registry);
  void record(const std::string& request_id, std::uint64_t seed, SeedSource source);

 private:
  detinfer::Counter given_, drawn_, default_;
  std::string environment_hash_;
};

class ConsistencyPolicy {
 public:
  // `on_fail` is called once, when the ratio first falls below fail_below.
  ConsistencyPolicy(double alert_below, double fail_below, std::uint64_t min_checks,
                    detinfer::MetricsRegistry& registry,
                    std::function<void(const std::string& reason)> on_fail = {});
  // Checks the monitor's statistics (no effect before min_checks checks): alerting while
  // ratio < alert_below (gauge detinfer_consistency_alert, a warning on entry); failed,
  // for good, once ratio < fail_below (gauge detinfer_consistency_failed, an error line,
  // on_fail). Thread-safe.
  void evaluate(const detinfer::ConsistencyStats& stats);
  // The session's alarm callback: counts detinfer_consistency_alarms_total and
  // evaluates with the ratio the monitor reports.
  detinfer::ConsistencyAlarm alarm(std::function<detinfer::ConsistencyStats()> stats);
  bool alerting() const;
  bool failed() const;
  std::string reason() const;  // why /health fails; "" while not failed

 private:
  double alert_below_, fail_below_;
  std::uint64_t min_checks_;
  detinfer::Gauge alert_gauge_, failed_gauge_;
  detinfer::Counter alarms_;
  std::function<void(const std::string&)> on_fail_;
  mutable std::mutex mu_;
  bool alerting_ = false;
  bool failed_ = false;
  std::string reason_;
};

}  // namespace detinfer_cli

namespace detinfer_cli {

// Everything the server's request pipeline calls into, transport-independent: the fleet
// check and seed policy before every request (any dialect), the seed log after it,
// /health and /metrics.
class ServeHooks {
 public:
  ServeHooks(const ServePolicyOptions& policy, std::uint64_t inject_mismatches,
             detinfer::DeterministicSession& session, ConsistencyPolicy& consistency,
             std::string system_fingerprint);
  // 421 for an X-Detinfer-Expect-Fingerprint of another fleet, else the seed policy on
  // the parsed request (which fields the client gave: req.sources).
  std::optional<ApiError> admit(const std::string& expect_header, ServeRequest& req,
                                SeedSource* source) const;
  void finished(const std::string& request_id, std::uint64_t seed, SeedSource source) {
    seed_log_.record(request_id, seed, source);
  }
  // /health: 200 {"status": "ok"}, or 503 "inconsistent" with the reason, or 503
  // "shutting_down".
  std::pair<int, nlohmann::json> health(bool stopping);
  // /metrics: the session's registry (with the server's families) and process_*.
  std::string metrics_text();
  // The session's consistency alarm (the monitor's thread): feeds the policy.
  void on_alarm(const detinfer::RunFingerprint& original, const detinfer::RunFingerprint& replayed,
                double ratio) {
    consistency_.alarm([this] { return consistency_stats(); })(original, replayed, ratio);
  }
  // The statistics the policy sees (plus the injected mismatches).
  detinfer::ConsistencyStats consistency_stats() const;

 private:
  const ServePolicyOptions& policy_;
  std::uint64_t inject_;
  detinfer::DeterministicSession& session_;
  ConsistencyPolicy& consistency_;
  std::string fingerprint_;
  SeedLog seed_log_;
  ServeMetrics metrics_;
};

}  // namespace detinfer_cli
