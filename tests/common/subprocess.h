// Test helper: run a program and capture its exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace detinfer::testing {

struct ProcessResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string read_file_or_empty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `command` through /bin/sh with stdin from `input`.
inline ProcessResult run_shell(const std::string& command, const std::string& input = "") {
  char tmpl[] = "/tmp/detinfer-test-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  ProcessResult r;
  if (dir == nullptr) return r;
  const std::string d(dir);
  {
    std::ofstream in(d + "/in", std::ios::binary);
    in << input;
  }
  const std::string full = command + " <" + d + "/in >" + d + "/out 2>" + d + "/err";
  const int status = std::system(full.c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file_or_empty(d + "/out");
  r.err = read_file_or_empty(d + "/err");
  std::system(("rm -rf '" + d + "'").c_str());
  return r;
}

// Path of the `detinfer` program under test (set by ctest's environment).
inline std::string cli_path() {
  const char* p = std::getenv("DETINFER_CLI");
  return p != nullptr ? p : "detinfer";
}

}  // namespace detinfer::testing
