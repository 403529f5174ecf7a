// Helpers of the CLI tests: scratch folders, the tiny model made by the real program, and
// `detinfer serve` as a child process that a test can signal and reap.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "model/model_test_util.h"

extern char** environ;

namespace detinfer::testing {

// A fresh folder under $DETINFER_TEST_TMP (or /tmp), unique per process and call.
inline std::string cli_scratch_dir(const std::string& name) { return scratch_dir("cli-" + name); }

// Writes the tiny qwen2 model (seed 1) with `detinfer make-tiny-model`; "" on failure.
inline std::string make_tiny_model_with_cli(const std::string& dir) {
  const ProcessResult r =
      run_shell(cli_path() + " make-tiny-model --arch qwen2 --seed 1 --out '" + dir + "'");
  return r.exit_code == 0 ? dir : std::string();
}

// `detinfer serve` on a free loopback port (--port 0 --port-file). The destructor
// SIGKILLs a server that is still running, so a failing test never leaks one.
class ServeProcess {
 public:
  ServeProcess() = default;
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;
  ~ServeProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  // Starts the server and waits (up to `timeout_s`) for it to write its port. Returns
  // false, with log() telling why, if it exits or times out first.
  bool start(const std::string& model_dir, const std::vector<std::string>& extra_args,
             double timeout_s = 60) {
    dir_ = cli_scratch_dir("serve");
    const std::string port_file = dir_ + "/port";
    std::vector<std::string> args = {cli_path(), "serve",       "--model", model_dir, "--port",
                                     "0",        "--port-file", port_file, "--host",  "127.0.0.1"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = dir_ + "/log";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      return false;
    }
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int>(timeout_s * 1000));
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string p = read_file_or_empty(port_file);
      if (!p.empty() && p.back() == '\n') {
        port_ = std::atoi(p.c_str());
        return port_ > 0;
      }
      if (poll_exit()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string log() const { return read_file_or_empty(dir_ + "/log"); }

  // Sends `sig` and waits up to `timeout_s` for the exit; the exit code, 128 + signal
  // when killed by one, or -1 when it is still running at the deadline.
  int signal_and_wait(int sig, double timeout_s) {
    if (pid_ <= 0) return -1;
    if (!exited_) ::kill(pid_, sig);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int>(timeout_s * 1000));
    while (!poll_exit()) {
      if (std::chrono::steady_clock::now() >= deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return exit_code_;
  }

 private:
  bool poll_exit() {
    if (exited_) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
    exited_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
  }

  std::string dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool exited_ = false;
  int exit_code_ = -1;
};

}  // namespace detinfer::testing
