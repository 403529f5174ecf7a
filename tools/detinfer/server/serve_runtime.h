// What `detinfer serve` builds around its session before serving (docs/server.md,
// "Session options, configuration file and policies"): the session opened with the
// configuration's options and fingerprint log, the consistency policy fed by the
// monitor's alarm, and the hooks the routes call. Transport-independent.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "detinfer/session.h"
#include "fingerprint_log.h"
#include "serve_policy.h"
#include "session_flags.h"

namespace detinfer_cli {

class ServeRuntime {
 public:
  // Opens the session. `request_exit` is called (once, from any thread) when the
  // consistency policy fails and config.policy.exit_on_inconsistency is set: the server
  // should drain and then return exit_code().
  ServeRuntime(const std::string& model_dir, ToolConfig config, std::uint64_t inject_mismatches,
               std::function<void()> request_exit);
  ~ServeRuntime();
  ServeRuntime(const ServeRuntime&) = delete;
  ServeRuntime& operator=(const ServeRuntime&) = delete;

  detinfer::DeterministicSession& session() { return session_; }
  ServeHooks& hooks() { return *hooks_; }
  const ToolConfig& config() const { return config_; }
  const std::string& system_fingerprint() const { return fingerprint_; }
  // False (with the reason on stderr) when --expect-system-fingerprint differs.
  bool fingerprint_accepted() const;
  // kExitInconsistent once the policy asked the server to exit, else `rc`.
  int exit_code(int rc) const { return exiting_ ? kExitInconsistent : rc; }

 private:
  ToolConfig config_;
  std::shared_ptr<std::atomic<ServeHooks*>> slot_;
  std::shared_ptr<RotatingLineFile> fingerprint_log_;
  detinfer::DeterministicSession session_;
  std::string fingerprint_;
  std::atomic<bool> exiting_{false};
  std::function<void()> request_exit_;
  std::unique_ptr<ConsistencyPolicy> policy_;
  std::unique_ptr<ServeHooks> hooks_;
};

}  // namespace detinfer_cli
