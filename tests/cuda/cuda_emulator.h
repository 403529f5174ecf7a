// A CPU emulation of the parts of the CUDA execution model detinfer's kernels use, so
// the kernel code itself (kernels/cuda/*_kernels.cuh, compiled as plain C++) can be run
// and compared bit for bit with the reference on a machine without a GPU.
//
// Blocks run one after another. The threads of a block are fibers (ucontext) on the
// calling thread, switched cooperatively: a thread runs until it reaches a barrier
// (__syncthreads, __syncwarp, a warp shuffle) and every other thread of the block (or
// warp) runs up to it before any goes on — the barrier semantics CUDA guarantees, with
// none of the cost of OS threads (the whole model forward pass is emulated in CI on two
// loaded cores). __shared__ variables become function-local statics (shared by the
// block's threads while it runs) and warp shuffles go through a per-block buffer. Device
// math falls back to the host paths of device_math.h (std::fma etc., the same IEEE
// operations). What this cannot show: hardware behaviour (the GPU's memory model and
// real concurrency between threads, instruction selection by ptxas, the tensor cores'
// internal summation order: the WMMA model below checks the GEMM's tiling, indexing and
// bounds, not its bits) — that needs the GPU tests.
//
// Not thread-safe: one launch at a time, from one thread.
//
// Include this first, before any kernels/cuda/*_kernels.cuh header.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
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

// Fiber switching. On x86-64 (without sanitizers) a minimal stack switch: no signal-mask
// system call per switch as in swapcontext, which makes the emulated model forward pass
// several times faster. Elsewhere ucontext.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define DETINFER_EMU_ASM_SWITCH 1
// Pushes the callee-saved registers, stores the stack pointer in *from, loads `to` and
// pops the registers saved there (System V x86-64 ABI).
extern "C" void detinfer_emu_switch(void** from, void* to);
__asm__(
    ".text\n"
    ".weak detinfer_emu_switch\n"
    ".type detinfer_emu_switch,@function\n"
    "detinfer_emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size detinfer_emu_switch, .-detinfer_emu_switch\n");
#endif

// The fiber scheduler of the running launch.
struct Fibers {
#ifdef DETINFER_EMU_ASM_SWITCH
  void* scheduler = nullptr;
  std::vector<void*> sp;
#else
  ucontext_t scheduler;
  std::vector<ucontext_t> ctx;
#endif
  std::vector<std::unique_ptr<char[]>> stacks;
  std::vector<bool> done;
  unsigned current = 0;
  std::function<void()> body;  // the kernel calls of the running launch
};
inline Fibers g_fibers;
inline constexpr std::size_t kFiberStack = std::size_t{256} << 10;

// Gives the CPU back to the scheduler (the fiber is resumed on the next round).
inline void yield() {
  Fibers& f = g_fibers;
#ifdef DETINFER_EMU_ASM_SWITCH
  detinfer_emu_switch(&f.sp[f.current], f.scheduler);
#else
  swapcontext(&f.ctx[f.current], &f.scheduler);
#endif
}

// Reusable barrier for a fixed number of fibers: the last to arrive releases the others,
// who wake up on their next turn.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    const std::uint64_t gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      return;
    }
    while (gen_ == gen) yield();
  }

 private:
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
  std::vector<std::uint64_t> dynamic;  // 8-byte aligned dynamic shared memory
};

inline dim3 t_thread;  // of the running fiber
inline dim3 t_block;
inline dim3 g_block_dim;
inline dim3 g_grid_dim;
inline BlockState* g_state = nullptr;

template <typename T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(g_state->dynamic.data());
}

inline Barrier& warp_barrier() { return *g_state->warps[t_thread.x / 32]; }

#ifdef DETINFER_EMU_ASM_SWITCH
[[noreturn]] inline void fiber_entry() {
  Fibers& f = g_fibers;
  f.body();
  f.done[f.current] = true;
  detinfer_emu_switch(&f.sp[f.current], f.scheduler);  // never resumed
  __builtin_unreachable();
}

// A fresh fiber on `stack`: the first switch to it "returns" into fiber_entry with the
// stack aligned as after a call.
inline void* start_fiber(char* stack) {
  auto top = reinterpret_cast<std::uintptr_t>(stack + kFiberStack) & ~std::uintptr_t{15};
  void** p = reinterpret_cast<void**>(top);
  *--p = nullptr;  // fiber_entry's (never used) return address
  *--p = reinterpret_cast<void*>(&fiber_entry);
  for (int r = 0; r < 6; ++r) *--p = nullptr;  // rbp, rbx, r12-r15
  return p;
}
#else
inline void fiber_entry() {
  Fibers& f = g_fibers;
  f.body();
  f.done[f.current] = true;  // returns to the scheduler through uc_link
}
#endif

// Runs f.body on `threads` fibers until all have returned, round robin.
inline void run_fibers(unsigned threads) {
  Fibers& f = g_fibers;
  while (f.stacks.size() < threads) f.stacks.emplace_back(new char[kFiberStack]);
  f.done.assign(threads, false);
#ifdef DETINFER_EMU_ASM_SWITCH
  f.sp.resize(std::max<std::size_t>(f.sp.size(), threads));
  for (unsigned t = 0; t < threads; ++t) f.sp[t] = start_fiber(f.stacks[t].get());
#else
  f.ctx.resize(std::max<std::size_t>(f.ctx.size(), threads));
  for (unsigned t = 0; t < threads; ++t) {
    getcontext(&f.ctx[t]);
    f.ctx[t].uc_stack.ss_sp = f.stacks[t].get();
    f.ctx[t].uc_stack.ss_size = kFiberStack;
    f.ctx[t].uc_link = &f.scheduler;
    makecontext(&f.ctx[t], fiber_entry, 0);
  }
#endif
  for (unsigned alive = threads; alive > 0;) {
    alive = 0;
    for (unsigned t = 0; t < threads; ++t) {
      if (f.done[t]) continue;
      f.current = t;
      t_thread = dim3(t);
#ifdef DETINFER_EMU_ASM_SWITCH
      detinfer_emu_switch(&f.scheduler, f.sp[t]);
#else
      swapcontext(&f.scheduler, &f.ctx[t]);
#endif
      if (!f.done[t]) ++alive;
    }
  }
}

// Runs kernel(args...) over the grid with `block.x` threads per block (1-D blocks). The
// block's fibers are made once per launch and run the blocks in order; a separate
// barrier at the end of each block keeps the next block from starting (and reusing the
// __shared__ statics) before every thread has finished this one.
template <typename Kernel, typename... Args>
void launch(dim3 grid, dim3 block, std::size_t dynamic_bytes, Kernel kernel, Args... args) {
  g_grid_dim = grid;
  g_block_dim = block;
  BlockState state(block.x);
  Barrier block_done(static_cast<int>(block.x));
  const std::size_t words = (dynamic_bytes + 7) / 8;
  state.dynamic.assign(words, 0);
  g_state = &state;
  const unsigned blocks = grid.x * grid.y;
  g_fibers.body = [&] {
    for (unsigned b = 0; b < blocks; ++b) {
      t_block = dim3(b % grid.x, b / grid.x);
      kernel(args...);
      block_done.wait();
      if (t_thread.x == 0) state.dynamic.assign(words, 0);  // fresh dynamic shared memory
      block_done.wait();
    }
  };
  run_fibers(block.x);
  g_fibers.body = nullptr;
  g_state = nullptr;
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
  if (pred) s.or_flag = 1;
  s.block.wait();
  const int result = s.or_flag;
  s.block.wait();
  if (emu::t_thread.x == 0) s.or_flag = 0;
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
