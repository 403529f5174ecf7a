// AVX-512 quantized panel kernels (compiled with -mavx512f -mavx512vl -mavx512vnni -mavx2
// -mfma -mf16c; called only after the dispatcher checked cpuid): the VNNI variant forms the
// block dot with vpdpbusd, the other with vpmaddubsw + vpmaddwd. Both sums are exact
// integers, so a CPU without VNNI gives the same bits (tests run both where VNNI exists).
#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/qlinear.h"

namespace detinfer::kernels::cpu {
namespace {
#include "kernels/cpu/qlinear_simd.h"

// vpdpbusd: |w| (unsigned) times x with w's sign, 4 products summed into each int32.
struct DotVnni {
  static __m256i dot(__m256i w, __m256i x) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
  }
};
}  // namespace

QLinearFn qlinear_avx512(bool vnni) {
  return vnni ? qlinear_panels<DotVnni> : qlinear_panels<DotMaddubs>;
}

}  // namespace detinfer::kernels::cpu
