// CPU model and ISA detection (cpuid via the compiler's builtins).
#pragma once

#include <string>
#include <vector>

namespace detinfer::core {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512bf16 = false;
};

const CpuFeatures& cpu_features();
std::string cpu_model_name();
// Names of the detected flags, in a fixed order.
std::vector<std::string> cpu_flag_names();

}  // namespace detinfer::core
