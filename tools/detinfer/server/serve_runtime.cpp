#include "serve_runtime.h"

#include <iostream>

#include "openai_protocol.h"

namespace detinfer_cli {

namespace {

// The monitor's alarm must exist before the session, the policy only after it: the alarm
// reaches the policy through a slot filled once both exist and emptied before either goes.
ToolConfig with_alarm(ToolConfig c, const std::shared_ptr<std::atomic<ServeHooks*>>& slot,
                      std::shared_ptr<RotatingLineFile>* log) {
  c.session.consistency.alarm = [slot](const detinfer::RunFingerprint& a,
                                       const detinfer::RunFingerprint& b, double ratio) {
    if (ServeHooks* h = slot->load()) h->on_alarm(a, b, ratio);
  };
  *log = attach_fingerprint_log(c);
  return c;
}

}  // namespace

ServeRuntime::ServeRuntime(const std::string& model_dir, ToolConfig config,
                           std::uint64_t inject_mismatches, std::function<void()> request_exit)
    : config_(std::move(config)),
      slot_(std::make_shared<std::atomic<ServeHooks*>>(nullptr)),
      session_(detinfer::DeterministicSession::open(
          model_dir, with_alarm(config_, slot_, &fingerprint_log_).session)),
      fingerprint_(detinfer_cli::system_fingerprint(session_)),
      request_exit_(std::move(request_exit)) {
  const detinfer::ConsistencyMonitorOptions& m = config_.session.consistency.monitor;
  policy_ = std::make_unique<ConsistencyPolicy>(
      m.threshold, config_.policy.fail_below, m.min_checks, session_.metrics(),
      [this](const std::string&) {
        if (!config_.policy.exit_on_inconsistency || exiting_.exchange(true)) return;
        std::cerr << "detinfer serve: --exit-on-inconsistency: draining and exiting with code "
                  << kExitInconsistent << "\n";
        if (request_exit_) request_exit_();
      });
  hooks_ = std::make_unique<ServeHooks>(config_.policy, inject_mismatches, session_, *policy_,
                                        fingerprint_);
  slot_->store(hooks_.get());
}

ServeRuntime::~ServeRuntime() {
  slot_->store(nullptr);
  session_.close();  // joins the monitor, whose alarm may still be running
}

bool ServeRuntime::fingerprint_accepted() const {
  const std::string& want = config_.policy.expect_system_fingerprint;
  if (want.empty() || want == fingerprint_) return true;
  std::cerr << "detinfer serve: error: this replica's system_fingerprint is " << fingerprint_
            << ", --expect-system-fingerprint is " << want << "; refusing to start\n";
  return false;
}

}  // namespace detinfer_cli
