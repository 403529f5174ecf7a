#include "detinfer/environment.h"

#include <gnu/libc-version.h>
#include <sys/utsname.h>

#include <thread>

#include "core/build_info.h"
#include "core/cpu_features.h"
#include "detinfer/version.h"

namespace detinfer {

EnvironmentInfo collect_environment() {
  EnvironmentInfo e;
  e.library_version = build_info::kVersion;
  e.git_revision = build_info::kGitRevision;
  e.compiler = build_info::kCompiler;
  e.build_type = build_info::kBuildType;
  e.build_flags = build_info::kBuildFlags;
  e.numerics_spec_version = kNumericsSpecVersion;
  e.cpu_model = core::cpu_model_name();
  e.cpu_flags = core::cpu_flag_names();
  e.hardware_threads = std::thread::hardware_concurrency();
  e.libtorch_version = build_info::kTorchVersion;
  e.glibc_version = gnu_get_libc_version();
  struct utsname u {};
  if (uname(&u) == 0) {
    e.os = std::string(u.sysname) + " " + u.release + " " + u.machine;
  } else {
    e.os = "unknown";
  }
  e.cuda_compiled = build_info::kCudaCompiled;
  return e;
}

}  // namespace detinfer
