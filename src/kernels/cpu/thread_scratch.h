// Per-thread scratch memory for the kernels: the quantized activations of a linear
// (QuantActs) and attention's scores and partials.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace detinfer::kernels::cpu {

struct AlignedFree {
  void operator()(std::uint8_t* p) const { ::operator delete[](p, std::align_val_t{64}); }
};

// Bytes of the calling thread's scratch, grown as needed and kept up to kKeptBytes (16 MiB)
// for the thread's next holder. A decode step quantizes the activations of a dozen linears
// and runs attention once per layer; a fresh allocation each time cost page faults and
// malloc time (measured: 220 page faults per attention call at 8192 keys, tripling the
// kernel's time; malloc and faults were a fifth of a quantized prefill). A need above
// kKeptBytes, or a second holder on the same thread while the first lives, gets a buffer of
// its own. The contents are undefined: holders write before they read.
class ThreadScratch {
 public:
  explicit ThreadScratch(std::size_t bytes);
  ~ThreadScratch();
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  std::uint8_t* data() const { return data_; }  // 64-byte aligned
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(data_);
  }
  static constexpr std::size_t kKeptBytes = std::size_t{16} << 20;

 private:
  std::uint8_t* data_ = nullptr;
  bool* release_ = nullptr;  // the thread's kept buffer's held flag, when this holds it
  std::unique_ptr<std::uint8_t[], AlignedFree> own_;
};

}  // namespace detinfer::kernels::cpu
