// Internal interface between the dispatching layer (kernels.cpp, linear.cpp, ...) and
// the per-ISA kernel translation units (scalar.cpp, avx2.cpp, avx512.cpp). The ISA TUs
// are compiled with their own -m flags and export only plain functions that work on a
// given range (rows, panels, heads); threading and allocation stay in baseline code, so
// no inline function compiled with AVX flags can be picked up by baseline code.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace detinfer::kernels::cpu {

// Packed linear weights: panels of kPanel output columns; panel p holds, for each
// k = 0..K-1, the kPanel weights W[p*kPanel + l][k] (l = 0..kPanel-1) contiguously,
// stored in the source dtype (f32, or the raw bf16/f16 bits), columns past N zero.
// A decode step (M=1) thus streams each panel as one sequential read.
inline constexpr std::int64_t kPanel = 64;
// Threaded linears split their panels into ranges that start on multiples of this many
// panels (kernels/linear.cpp), a multiple of every ISA's batch-1 streaming width
// (kRowPanels, checked in simd_linear.h), so that no range sends panels through the
// kernel's narrower tails that a single-threaded call would stream together.
inline constexpr std::int64_t kPanelGroup = 4;

struct PackedWeights {
  const void* data = nullptr;  // 64-byte aligned
  core::DType dtype = core::DType::kF32;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t panels = 0;      // ceil(n / kPanel)
  const float* bias = nullptr;  // n floats or null
};

// y[r][j] for rows [0, m) and columns of panels [p0, p1).
using LinearFn = void (*)(const PackedWeights& w, const float* x, std::int64_t ldx, std::int64_t m,
                          float* y, std::int64_t ldy, std::int64_t p0, std::int64_t p1);

// Attention of the `group` query heads that share kv head `kv_head`, for one query row,
// in two phases over the spec's 64-key chunks (kernels/attention.cpp folds the results):
// q holds `group` consecutive head vectors of head_dim floats; off[t] is the offset (in
// floats) of token t's row in the K and V pools (kv head 0), i.e.
// (block_table[t / block_size] * block_size + t % block_size) * kv_stride.
struct AttnHeads {
  const float* q = nullptr;
  std::int64_t group = 0;
  std::int64_t kv_head = 0;
  const PagedKvView* kv = nullptr;
  const std::int64_t* off = nullptr;
  float scale = 1.0f;
  // Optional: K of this kv head already transposed and widened by attn_transpose_k (of the
  // same ISA), keys [0, t) with no mask offset; the key block starting at j (a multiple of
  // the ISA's lanes) at kt + j * head_dim. Null: the kernels transpose as they go.
  const float* kt = nullptr;
  // Kv heads of each K/V token row whose lines the kernels prefetch, from this head on: the
  // heads that the same task runs next over the same keys (1: this head's only).
  std::int64_t prefetch_heads = 1;
};

// Scores of keys [j0, j1): S[g * lds + j] = dot(q_g, K[j], d) * scale, and mx[g] = the
// largest of them ignoring NaNs (-inf when there is none). Positions of S from j1 up to
// the next multiple of 16 may be overwritten. `scratch` has attention_scratch_floats(d, group).
using AttnScoresFn = void (*)(const AttnHeads& a, std::int64_t j0, std::int64_t j1, float* S,
                              std::int64_t lds, float* mx, float* scratch);

// For each 64-key chunk i of [j0, j1) (j0 a multiple of 64): S[g][j] = exp(S[g][j] - m[g])
// in place, the chunk's denominator partial p_den[g] (in-order sum of the chunk's e) and
// numerator partial p_num[g][c] (fma chain over the chunk's keys of e[j] * V[j][c]).
// den_stride == 0: accumulate, den[g] = den[g] + p_den[g] and num[g*d + c] = num + p_num
// (the spec's fold, when [j0, j1) is the whole range and den/num start at +0); else
// store chunk i's partials at den + i*den_stride and num + i*num_stride.
using AttnPartialsFn = void (*)(const AttnHeads& a, float* S, std::int64_t lds, const float* m,
                                std::int64_t j0, std::int64_t j1, float* den,
                                std::int64_t den_stride, float* num, std::int64_t num_stride);

// K of keys [j0, j1) (j0 a multiple of 16) transposed and widened for AttnHeads::kt: the
// block of the ISA's lanes starting at key j at kt + j * head_dim, lanes past j1 zero. A
// prefill's rows all read the same keys, so they transpose them once instead of per row.
// The scalar ISA writes nothing and its kernels ignore kt.
using AttnTransposeKFn = void (*)(const AttnHeads& a, std::int64_t j0, std::int64_t j1, float* kt);

// y[i] = exp_f32(x[i]) (x and y may alias).
using ExpFn = void (*)(const float* x, float* y, std::int64_t n);

// out[i] = g[i] / (1 + exp_f32(-g[i])) * u[i] (ref::silu_mul; elementwise, each lane the
// reference's operations).
using SiluMulFn = void (*)(const float* g, const float* u, float* out, std::int64_t n);

// Chunked dot product (ref::dot), with hardware fma where the ISA has it.
using DotFn = float (*)(const float* a, const float* b, std::int64_t k);

// ref::argmax: the lowest index of the largest of x[0..n) (n > 0; a NaN is an error).
using ArgmaxFn = std::int64_t (*)(const float* x, std::int64_t n);

// ref::max_value (n > 0): x[0] when it is NaN, else the largest non-NaN value, the first
// of equal values (which of -0 and +0).
using MaxValueFn = float (*)(const float* x, std::int64_t n);

// y[i] = exp_f32(x[i] - m) (x and y may alias): softmax's exponentials in one pass.
using ExpSubFn = void (*)(const float* x, float m, float* y, std::int64_t n);

// out[i] = a[i] + b[i] (out may alias a or b): residual adds and the folds of chunk
// partials (elementwise; each lane one binary32 add).
using AddFn = void (*)(const float* a, const float* b, float* out, std::int64_t n);

struct IsaKernels {
  LinearFn linear;
  AttnScoresFn attn_scores;
  AttnPartialsFn attn_partials;
  AttnTransposeKFn attn_transpose_k;
  ExpFn exp;
  DotFn dot;
  SiluMulFn silu_mul;
  ArgmaxFn argmax;
  MaxValueFn max_value;
  ExpSubFn exp_sub;
  AddFn add;
};

// Scratch of AttnScoresFn: 8 transposed blocks of 16 keys, then 16 lane-wise maxima per
// query head of the group.
inline std::int64_t attention_scratch_floats(std::int64_t head_dim, std::int64_t group) {
  return 8 * 16 * head_dim + 16 * group;
}

// Which SIMD translation units this build has.
inline constexpr bool kHaveAvx2 = true;
inline constexpr bool kHaveAvx512 = true;

const IsaKernels& scalar_kernels();
const IsaKernels& avx2_kernels();    // only call when the CPU supports it
const IsaKernels& avx512_kernels();  // only call when the CPU supports it

// The kernels of the active ISA.
const IsaKernels& active_kernels();

}  // namespace detinfer::kernels::cpu
