#include "serve_policy.h"

#include <iostream>
#include <sstream>

#include "detinfer/environment.h"
#include "detinfer/error.h"
#include "detinfer/fingerprint.h"
#include "detinfer/hash.h"
#include "detinfer/logging.h"

namespace detinfer_cli {

bool is_probe_request(const detinfer_http::Request& r) {
  return (r.method == "GET" || r.method == "HEAD") && (r.path == "/health" || r.path == "/metrics");
}

const char* to_string(SeedSource s) {
  switch (s) {
    case SeedSource::kGiven:
      return "given";
    case SeedSource::kDrawn:
      return "drawn";
    default:
      return "default";
  }
}

std::optional<ApiError> apply_seed_policy(const ServePolicyOptions& policy,
                                          bool temperature_defaulted,
                                          detinfer::GenerationConfig& config, SeedSource* source) {
  if (temperature_defaulted) config.temperature = static_cast<float>(policy.default_temperature);
  const bool sampled = config.temperature > 0.0f;
  if (config.seed) {
    *source = SeedSource::kGiven;
  } else if (sampled) {
    *source = SeedSource::kDrawn;
    if (policy.require_seed) {
      ApiError e;
      e.message =
          "this server requires a 'seed' for sampled requests (temperature > 0): results are "
          "replayable only with a seed";
      e.param = "seed";
      e.code = "seed_required";
      return e;
    }
  } else {
    *source = SeedSource::kDefault;
  }
  return std::nullopt;
}

std::optional<ApiError> check_expected_fingerprint(const std::string& expected,
                                                   const std::string& ours) {
  if (expected.empty() || expected == ours) return std::nullopt;
  ApiError e;
  e.status = 421;
  e.message = "this replica's system_fingerprint is " + ours + ", the request expects " + expected +
              "; retry on another replica";
  e.param = "X-Detinfer-Expect-Fingerprint";
  e.type = "invalid_request_error";
  e.code = "fingerprint_mismatch";
  return e;
}

std::string environment_hash() {
  const detinfer::EnvironmentInfo e = detinfer::collect_environment();
  detinfer::Hasher h;
  for (const std::string* s :
       {&e.library_version, &e.git_revision, &e.compiler, &e.build_type, &e.build_flags,
        &e.cpu_model, &e.libtorch_version, &e.glibc_version, &e.os}) {
    h.update_field(*s);
  }
  for (const auto& f : e.cpu_flags) h.update_field(f);
  h.update_u32(static_cast<std::uint32_t>(e.numerics_spec_version));
  h.update_u32(e.hardware_threads);
  for (const auto& [name, value] : detinfer::relevant_env_vars()) {
    h.update_field(name);
    h.update_field(value);
  }
  return detinfer::hex64(h.digest64());
}

SeedLog::SeedLog(detinfer::MetricsRegistry& registry) : environment_hash_(environment_hash()) {
  const char* help = "Requests by where their sampling seed came from";
  given_ = registry.counter("detinfer_seeds_total", help, {{"source", "given"}});
  drawn_ = registry.counter("detinfer_seeds_total", help, {{"source", "drawn"}});
  default_ = registry.counter("detinfer_seeds_total", help, {{"source", "default"}});
}

void SeedLog::record(const std::string& request_id, std::uint64_t seed, SeedSource source) {
  (source == SeedSource::kGiven ? given_ : source == SeedSource::kDrawn ? drawn_ : default_).inc();
  if (detinfer::log_level() > detinfer::LogLevel::kInfo) return;
  std::ostringstream line;
  line << "detinfer serve: info: request " << request_id << " seed " << seed << " ("
       << to_string(source) << ") environment " << environment_hash_ << "\n";
  std::cerr << line.str();
}

ConsistencyPolicy::ConsistencyPolicy(double alert_below, double fail_below,
                                     std::uint64_t min_checks, detinfer::MetricsRegistry& registry,
                                     std::function<void(const std::string&)> on_fail)
    : alert_below_(alert_below),
      fail_below_(fail_below),
      min_checks_(min_checks),
      alert_gauge_(registry.gauge("detinfer_consistency_alert",
                                  "1 while the consistency ratio is below alert_below")),
      failed_gauge_(registry.gauge(
          "detinfer_consistency_failed",
          "1 once the consistency ratio fell below fail_below (/health answers 503)")),
      alarms_(registry.counter("detinfer_consistency_alarms_total",
                               "Consistency-monitor alarms (mismatches while below alert_below)")),
      on_fail_(std::move(on_fail)) {
  if (!(fail_below >= 0 && fail_below <= alert_below && alert_below <= 1)) {
    throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                          "consistency.fail_below must be in [0, consistency.alert_below] and "
                          "alert_below in [0, 1]",
                          "consistency.fail_below");
  }
}

void ConsistencyPolicy::evaluate(const detinfer::ConsistencyStats& s) {
  if (s.checks == 0 || s.checks < min_checks_) return;
  std::function<void(const std::string&)> fire;
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool alert = s.ratio < alert_below_;
    if (alert && !alerting_) {
      std::cerr << "detinfer serve: warning: consistency ratio " << s.ratio << " (" << s.matches
                << "/" << s.checks << ") is below alert_below " << alert_below_ << "\n";
    }
    alerting_ = alert;
    alert_gauge_.set(alert ? 1 : 0);
    if (s.ratio < fail_below_ && !failed_) {
      failed_ = true;
      std::ostringstream r;
      r << "consistency ratio " << s.ratio << " (" << s.matches << " of " << s.checks
        << " replays matched) is below fail_below " << fail_below_;
      reason_ = r.str();
      reason = reason_;
      failed_gauge_.set(1);
      std::cerr << "detinfer serve: error: " << reason_ << "\n";
      fire = on_fail_;
    }
  }
  if (fire) fire(reason);
}

detinfer::ConsistencyAlarm ConsistencyPolicy::alarm(
    std::function<detinfer::ConsistencyStats()> stats) {
  return [this, stats](const detinfer::RunFingerprint&, const detinfer::RunFingerprint&,
                       double ratio) {
    alarms_.inc();
    detinfer::ConsistencyStats s = stats ? stats() : detinfer::ConsistencyStats{};
    s.ratio = ratio;
    if (s.checks == 0) s.checks = min_checks_;
    evaluate(s);
  };
}

bool ConsistencyPolicy::alerting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return alerting_;
}
bool ConsistencyPolicy::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}
std::string ConsistencyPolicy::reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reason_;
}

}  // namespace detinfer_cli

namespace detinfer_cli {

ServeHooks::ServeHooks(const ServePolicyOptions& policy, std::uint64_t inject_mismatches,
                       detinfer::DeterministicSession& session, ConsistencyPolicy& consistency,
                       std::string system_fingerprint)
    : policy_(policy),
      inject_(inject_mismatches),
      session_(session),
      consistency_(consistency),
      fingerprint_(std::move(system_fingerprint)),
      seed_log_(session.metrics()),
      metrics_(session) {}

std::optional<ApiError> ServeHooks::admit(const std::string& expect_header, ServeRequest& req,
                                          SeedSource* source) const {
  if (auto e = check_expected_fingerprint(expect_header, fingerprint_)) return e;
  const bool temperature_defaulted = req.sources.of("temperature") == FieldSource::kApi;
  return apply_seed_policy(policy_, temperature_defaulted, req.config, source);
}

detinfer::ConsistencyStats ServeHooks::consistency_stats() const {
  detinfer::ConsistencyStats s = session_.consistency_stats();
  s.checks += inject_;
  s.mismatches += inject_;
  if (s.checks > 0) s.ratio = static_cast<double>(s.matches) / static_cast<double>(s.checks);
  return s;
}

std::pair<int, nlohmann::json> ServeHooks::health(bool stopping) {
  consistency_.evaluate(consistency_stats());
  nlohmann::json body = {{"status", "ok"}, {"system_fingerprint", fingerprint_}};
  if (consistency_.failed()) {
    body["status"] = "inconsistent";
    body["reason"] = consistency_.reason();
  } else if (stopping || session_.closed()) {
    body["status"] = "shutting_down";
  }
  return {body["status"] == "ok" ? 200 : 503, body};
}

std::string ServeHooks::metrics_text() {
  consistency_.evaluate(consistency_stats());
  metrics_.update();
  return session_.metrics_text() + process_metrics_text();
}

}  // namespace detinfer_cli
