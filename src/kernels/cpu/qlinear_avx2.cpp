// AVX2 quantized panel kernel (compiled with -mavx2 -mfma -mf16c; called only after the
// dispatcher checked cpuid). Everything in an anonymous namespace (see avx2.cpp).
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/qlinear.h"

namespace detinfer::kernels::cpu {
namespace {
#include "kernels/cpu/qlinear_simd.h"
}  // namespace

QLinearFn qlinear_avx2() { return qlinear_panels<Dot256>; }

}  // namespace detinfer::kernels::cpu
