// The library, device and environment groups of a fingerprint, from this process.
#include <cstdlib>

#include "detinfer/fingerprint.h"

namespace detinfer {

std::map<std::string, std::string> relevant_env_vars() {
  // Variables that can change which kernels run, how many threads they use, or what a
  // GPU library computes, and DETINFER_PACKAGES (the package set of a deploy/ image).
  // DETINFER_LOG_LEVEL and the like are deliberately absent.
  static const char* const kNames[] = {
      "DETINFER_CPU_ISA",        "DETINFER_THREADS",     "OMP_NUM_THREADS",
      "MKL_NUM_THREADS",         "OPENBLAS_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
      "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
      "DETINFER_PACKAGES"};
  std::map<std::string, std::string> vars;
  for (const char* name : kNames) {
    if (const char* v = std::getenv(name)) vars[name] = v;
  }
  return vars;
}

void set_host_groups(RunFingerprint& fp, const EnvironmentInfo& env,
                     const std::map<std::string, std::string>& env_vars) {
  fp.library = {env.library_version, env.git_revision, env.compiler, env.build_type,
                env.build_flags};
  fp.numerics.spec_version = env.numerics_spec_version;
  fp.device.cpu_model = env.cpu_model;
  fp.device.cpu_flags = env.cpu_flags;
  fp.device.hardware_threads = env.hardware_threads;
  fp.environment.os = env.os;
  fp.environment.glibc_version = env.glibc_version;
  fp.environment.libtorch_version = env.libtorch_version;
  fp.environment.env_vars = env_vars;
}

void set_host_groups(RunFingerprint& fp) {
  set_host_groups(fp, collect_environment(), relevant_env_vars());
}

}  // namespace detinfer
