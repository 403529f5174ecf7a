// Transparent huge pages for the large buffers that are written whole soon after they are
// allocated (packed weights, activations, a step's logits; not the KV pool, whose blocks
// are touched as contexts grow). A buffer of hundreds of MB in 4 KiB pages costs one page fault per
// 4 KiB at its first touch (a model load faulted ~384,000 times, the first teacher-forced
// pass of 256 positions ~80,000, each several microseconds in a virtual machine) and one
// TLB entry per 4 KiB when a decode step streams the weights; 2 MiB pages cut both by
// 512. Only how memory is mapped changes, never its contents or any result.
#pragma once

#include <cstddef>
#include <vector>

namespace detinfer::core {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// Asks the kernel to back the 2 MiB-aligned part of [p, p + bytes) with huge pages
// (Linux: madvise(MADV_HUGEPAGE), which transparent huge pages honour in their "always"
// and "madvise" modes; elsewhere, or for less than a huge page, nothing). Call it before
// the memory is first touched: pages already present stay as they are. Returns the bytes
// advised (0 when none); failures are ignored, as the advice is only a hint.
std::size_t advise_huge_pages(void* p, std::size_t bytes) noexcept;

// Gives v fresh storage for n elements, advised huge before anything touches it, when n is
// more than v holds and at least a huge page; v's elements are kept when `keep`.
template <class T>
void grow_huge(std::vector<T>& v, std::size_t n, bool keep) {
  if (n <= v.capacity() || n * sizeof(T) < kHugePageBytes) return;
  std::vector<T> grown;
  grown.reserve(n);
  advise_huge_pages(grown.data(), n * sizeof(T));
  if (keep) grown.assign(v.begin(), v.end());
  v.swap(grown);
}

// v.resize(n), with storage it allocates advised huge before it is touched.
template <class T>
void resize_huge(std::vector<T>& v, std::size_t n) {
  grow_huge(v, n, true);
  v.resize(n);
}

// v.assign(n, value), likewise (value converted to T, as assign does; one pass).
template <class T>
void assign_huge(std::vector<T>& v, std::size_t n,
                 const typename std::vector<T>::value_type& value) {
  grow_huge(v, n, false);
  v.assign(n, value);
}

}  // namespace detinfer::core
