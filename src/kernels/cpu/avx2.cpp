// AVX2 + FMA + F16C kernels (8 lanes). Compiled with -mavx2 -mfma -mf16c; only called
// after the dispatcher checked cpuid. Everything here is in an anonymous namespace so
// no AVX2 code can be picked up by another translation unit.
#include <immintrin.h>

#include <cstdint>
#include <utility>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/reference/exp_log_constants.h"
#include "kernels/reference/reference.h"

namespace detinfer::kernels::cpu {
namespace {

#include "kernels/cpu/vec256.h"

using V = V256;

constexpr int kMaxRows = 6;
constexpr int kTileVecs = 2;      // 16 columns per tile
constexpr int kRowPanels = 1;     // M = 1: panels streamed at once (simd_linear.h; 16 registers)
constexpr int kScoreAccs = 12;    // attention score tile: heads x key blocks accumulators
constexpr int kHeadsPerPass = 6;  // attention values: 6 heads x 2 vectors accumulators
constexpr int kValueVecs = 2;
constexpr int kRegScoreMinHeads = 99;  // never: 16 ymm registers cannot hold a tile and the sums

#include "kernels/cpu/simd_kernels.h"
// After simd_kernels.h (uses its exp_lanes and kChunk).
#include "kernels/cpu/attention_simd.h"
// After attention_simd.h (uses its KvLoad, prefetch_row and heads_per_pass).
#include "kernels/cpu/attention_partials_simd.h"

}  // namespace

const IsaKernels& avx2_kernels() {
  static const IsaKernels k{linear_simd,   attn_scores, attn_partials, attn_transpose_k,
                            exp_vec,       dot_fma,     silu_mul_vec,  argmax_vec,
                            max_value_vec, exp_sub_vec, add_vec};
  return k;
}

}  // namespace detinfer::kernels::cpu
