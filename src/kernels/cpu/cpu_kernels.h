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

struct PackedWeights {
  const void* data = nullptr;  // 64-byte aligned
  DType dtype = DType::kF32;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t panels = 0;      // ceil(n / kPanel)
  const float* bias = nullptr;  // n floats or null
};

// y[r][j] for rows [0, m) and columns of panels [p0, p1).
using LinearFn = void (*)(const PackedWeights& w, const float* x, std::int64_t ldx, std::int64_t m,
                          float* y, std::int64_t ldy, std::int64_t p0, std::int64_t p1);

// Attention of the `group` query heads that share kv head `kv_head`, for one query row:
// q and out hold `group` consecutive head vectors of head_dim floats. token_offset[t]
// is the offset (in floats) of token t's row in the K and V pools (kv head 0), i.e.
// (block_table[t / block_size] * block_size + t % block_size) * kv_stride, computed
// once per call. `scratch` has room for attention_scratch_floats(...) floats.
using AttentionFn = void (*)(const float* q, std::int64_t group, std::int64_t num_keys,
                             std::int64_t kv_head, const PagedKvView& kv,
                             const std::int64_t* token_offset, float scale, float* out,
                             float* scratch);

// y[i] = exp_f32(x[i]) (x and y may alias).
using ExpFn = void (*)(const float* x, float* y, std::int64_t n);

// Chunked dot product (ref::dot), with hardware fma where the ISA has it.
using DotFn = float (*)(const float* a, const float* b, std::int64_t k);

struct IsaKernels {
  LinearFn linear;
  AttentionFn attention;
  ExpFn exp;
  DotFn dot;
};

inline std::int64_t attention_scratch_floats(std::int64_t num_keys, std::int64_t head_dim,
                                             std::int64_t group) {
  // SIMD kernels: a transposed q tile (head_dim x 16) and one 16-lane vector per key.
  (void)group;
  return (num_keys + head_dim) * 16 + 64;
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
