#include "core/cpu_features.h"

#include <fstream>
#include <string>

namespace detinfer::core {

namespace {
CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  // GCC 12's builtin knows no "f16c"/"avx512bf16"; read them from /proc/cpuinfo.
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      const std::string padded = line + " ";
      f.f16c = padded.find(" f16c ") != std::string::npos;
      f.avx512bf16 = padded.find(" avx512_bf16 ") != std::string::npos;
      break;
    }
  }
#endif
  return f;
}
}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        const auto first = v.find_first_not_of(" \t");
        return first == std::string::npos ? std::string() : v.substr(first);
      }
    }
  }
  return "unknown";
}

std::vector<std::string> cpu_flag_names() {
  const CpuFeatures& f = cpu_features();
  std::vector<std::string> names;
  if (f.fma) names.emplace_back("fma");
  if (f.f16c) names.emplace_back("f16c");
  if (f.avx2) names.emplace_back("avx2");
  if (f.avx512f) names.emplace_back("avx512f");
  if (f.avx512bw) names.emplace_back("avx512bw");
  if (f.avx512vl) names.emplace_back("avx512vl");
  if (f.avx512bf16) names.emplace_back("avx512_bf16");
  return names;
}

}  // namespace detinfer::core
