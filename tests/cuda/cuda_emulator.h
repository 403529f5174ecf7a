// A CPU emulation of the parts of the CUDA execution model detinfer's kernels use, so
// the kernel code itself (kernels/cuda/*_kernels.cuh, compiled as plain C++) can be run
// and compared bit for bit with the reference on a machine without a GPU.
//
// Blocks run one after another; the threads of a block are std::threads, so __shared__
// variables become function-local statics (shared by the block's threads while it runs),
// __syncthreads/__syncwarp are barriers and warp shuffles go through a per-block buffer.
// Device math falls back to the host paths of device_math.h (std::fma etc., the same
// IEEE operations). What this cannot show: hardware behaviour (the GPU's memory model,
// instruction selection by ptxas, the tensor cores' internal summation order: the WMMA
// model below checks the GEMM's tiling, indexing and bounds, not its bits) — that needs the
// GPU tests.
//
// Include this first, before any kernels/cuda/*_kernels.cuh header.
#pragma once

#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define DETINFER_CUDA_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define threadIdx (::emu::t_thread)
#define blockIdx (::emu::t_block)
#define blockDim (::emu::g_block_dim)
#define gridDim (::emu::g_grid_dim)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3() = default;
  dim3(unsigned a, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};

struct uint4 {
  std::uint32_t x, y, z, w;
};

inline uint4 make_uint4(std::uint32_t x, std::uint32_t y, std::uint32_t z, std::uint32_t w) {
  return uint4{x, y, z, w};
}

struct __nv_bfloat16 {
  std::uint16_t bits;
};

namespace emu {

// Reusable barrier for a fixed number of threads.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    const std::uint64_t gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return gen_ != gen; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_;
  int count_ = 0;
  std::uint64_t gen_ = 0;
};

struct BlockState {
  explicit BlockState(unsigned threads) : block(static_cast<int>(threads)), shfl(threads) {
    for (unsigned w = 0; w < (threads + 31) / 32; ++w)
      warps.push_back(std::make_unique<Barrier>(
          static_cast<int>(threads - w * 32 < 32 ? threads - w * 32 : 32)));
  }
  Barrier block;
  std::vector<std::unique_ptr<Barrier>> warps;
  std::vector<std::uint64_t> shfl;
  int or_flag = 0;
  std::mutex or_mutex;
  std::vector<std::uint64_t> dynamic;  // 8-byte aligned dynamic shared memory
};

inline thread_local dim3 t_thread;
inline thread_local dim3 t_block;
inline dim3 g_block_dim;
inline dim3 g_grid_dim;
inline BlockState* g_state = nullptr;

template <typename T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(g_state->dynamic.data());
}

inline Barrier& warp_barrier() { return *g_state->warps[t_thread.x / 32]; }

// Runs kernel(args...) over the grid with `block.x` threads per block (1-D blocks).
template <typename Kernel, typename... Args>
void launch(dim3 grid, dim3 block, std::size_t dynamic_bytes, Kernel kernel, Args... args) {
  g_grid_dim = grid;
  g_block_dim = block;
  for (unsigned by = 0; by < grid.y; ++by) {
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      BlockState state(block.x);
      state.dynamic.assign((dynamic_bytes + 7) / 8, 0);
      g_state = &state;
      std::vector<std::thread> threads;
      threads.reserve(block.x);
      for (unsigned t = 0; t < block.x; ++t) {
        threads.emplace_back([=] {
          t_thread = dim3(t);
          t_block = dim3(bx, by);
          kernel(args...);
        });
      }
      for (auto& th : threads) th.join();
      g_state = nullptr;
    }
  }
}

template <typename T>
T shfl(T v, unsigned src_lane) {
  static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
  const unsigned tid = t_thread.x;
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  g_state->shfl[tid] = bits;
  warp_barrier().wait();
  const std::uint64_t got = g_state->shfl[(tid / 32) * 32 + src_lane];
  warp_barrier().wait();
  T out;
  std::memcpy(&out, &got, sizeof out);
  return out;
}

}  // namespace emu

inline void __syncthreads() { emu::g_state->block.wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::warp_barrier().wait(); }

inline int __syncthreads_or(int pred) {
  emu::BlockState& s = *emu::g_state;
  if (pred) {
    std::lock_guard<std::mutex> lock(s.or_mutex);
    s.or_flag = 1;
  }
  s.block.wait();
  int result;
  {
    std::lock_guard<std::mutex> lock(s.or_mutex);
    result = s.or_flag;
  }
  s.block.wait();
  if (emu::t_thread.x == 0) {
    std::lock_guard<std::mutex> lock(s.or_mutex);
    s.or_flag = 0;
  }
  s.block.wait();
  return result;
}

template <typename T>
T __shfl_sync(unsigned, T v, int src_lane) {
  return emu::shfl(v, static_cast<unsigned>(src_lane));
}

template <typename T>
T __shfl_down_sync(unsigned, T v, unsigned delta) {
  const unsigned lane = emu::t_thread.x % 32;
  return emu::shfl(v, lane + delta < 32 ? lane + delta : lane);
}

inline int atomicExch(int* p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }

// A model of nvcuda::wmma for 16x16x16 bf16 -> f32: every lane holds the whole tile
// (element (r, c) at x[r * 16 + c]; A is (m, k), B is (k, n)), mma_sync sums over k in
// order with fma, and lane 0 stores. Enough to check which elements the GEMM kernel
// loads, multiplies and stores; the real tensor cores sum in their own order.
namespace nvcuda::wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "only the 16x16x16 shape is modelled");
  float x[256];
};

inline float widen(__nv_bfloat16 v) {
  const std::uint32_t u = static_cast<std::uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// What the CUDA programming guide requires of WMMA pointers and strides: 256-bit aligned
// pointers, ldm a multiple of 16 bytes.
template <typename T>
void check_wmma_pointer(const T* p, unsigned ldm) {
  if (reinterpret_cast<std::uintptr_t>(p) % 32 != 0 || (ldm * sizeof(T)) % 16 != 0) {
    std::fprintf(stderr, "emulated wmma: misaligned pointer %p or ldm %u\n",
                 static_cast<const void*>(p), ldm);
    std::abort();  // test-only: a kernel bug the GPU would turn into garbage or a fault
  }
}

template <typename F>
void fill_fragment(F& f, float v) {
  for (float& e : f.x) e = v;
}

inline void load_matrix_sync(fragment<matrix_a, 16, 16, 16, __nv_bfloat16, row_major>& f,
                             const __nv_bfloat16* p, unsigned ldm) {
  check_wmma_pointer(p, ldm);
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < 16; ++k) f.x[r * 16 + k] = widen(p[r * ldm + k]);
}

inline void load_matrix_sync(fragment<matrix_b, 16, 16, 16, __nv_bfloat16, col_major>& f,
                             const __nv_bfloat16* p, unsigned ldm) {
  check_wmma_pointer(p, ldm);
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 16; ++n) f.x[k * 16 + n] = widen(p[n * ldm + k]);
}

inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
                     const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, row_major>& a,
                     const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, col_major>& b,
                     const fragment<accumulator, 16, 16, 16, float>& c) {
  float out[256];
  for (int r = 0; r < 16; ++r) {
    for (int n = 0; n < 16; ++n) {
      float s = c.x[r * 16 + n];
      for (int k = 0; k < 16; ++k) s = std::fma(a.x[r * 16 + k], b.x[k * 16 + n], s);
      out[r * 16 + n] = s;
    }
  }
  std::memcpy(d.x, out, sizeof out);
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout) {
  check_wmma_pointer(p, ldm);
  if (emu::t_thread.x % 32 == 0) {
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 16; ++c)
        p[layout == mem_row_major ? r * ldm + c : c * ldm + r] = f.x[r * 16 + c];
  }
  __syncwarp();
}
}  // namespace nvcuda::wmma
