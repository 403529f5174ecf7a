#include "kernels/cpu/thread_scratch.h"

namespace detinfer::kernels::cpu {

ThreadScratch::ThreadScratch(std::size_t bytes) {
  struct Kept {
    std::unique_ptr<std::uint8_t[], AlignedFree> buf;
    std::size_t size = 0;
    bool held = false;
  };
  thread_local Kept kept;
  if (bytes <= kKeptBytes && !kept.held) {
    if (kept.size < bytes) {
      kept.buf.reset(static_cast<std::uint8_t*>(::operator new[](bytes, std::align_val_t{64})));
      kept.size = bytes;
    }
    kept.held = true;
    data_ = kept.buf.get();
    release_ = &kept.held;
    return;
  }
  own_.reset(static_cast<std::uint8_t*>(::operator new[](bytes, std::align_val_t{64})));
  data_ = own_.get();
}

ThreadScratch::~ThreadScratch() {
  if (release_ != nullptr) *release_ = false;
}

}  // namespace detinfer::kernels::cpu
