// The build and machine facts that `detinfer env` prints and run fingerprints record.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "detinfer/export.h"

namespace detinfer {

struct DETINFER_API EnvironmentInfo {
  std::string library_version;         // e.g. "0.1.0"
  std::string git_revision;            // short hash at configure time, "-dirty" when modified
  std::string compiler;                // e.g. "GNU 12.2.0"
  std::string build_type;              // CMAKE_BUILD_TYPE
  std::string build_flags;             // C++ flags detinfer's own code was compiled with
  int numerics_spec_version = 0;       // docs/numerics.md
  std::string cpu_model;               // /proc/cpuinfo "model name"
  std::vector<std::string> cpu_flags;  // ISA flags relevant to the kernels (avx2, fma, ...)
  std::uint32_t hardware_threads = 0;  // std::thread::hardware_concurrency()
  std::string libtorch_version;        // libtorch the library was built against
  std::string glibc_version;           // gnu_get_libc_version() at run time
  std::string os;                      // uname: sysname release machine
  bool cuda_compiled = false;          // CUDA kernels compiled in
};

// Collects the facts once per call; cheap enough to call per session.
DETINFER_API EnvironmentInfo collect_environment();

}  // namespace detinfer
