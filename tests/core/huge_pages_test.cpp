// core/huge_pages.h: the advice covers exactly the 2 MiB-aligned interior of a range and
// nothing below a huge page; resize_huge / assign_huge keep std::vector's semantics.
#include "core/huge_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <filesystem>
#include <vector>

namespace detinfer::core {
namespace {

constexpr std::size_t kHuge = kHugePageBytes;

// Whether this kernel has transparent huge pages at all (madvise(MADV_HUGEPAGE) is EINVAL
// without them, and the advice is then none).
bool kernel_has_thp() {
  return std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled");
}

// An anonymous mapping of `bytes` starting on a 2 MiB boundary.
struct AlignedMapping {
  explicit AlignedMapping(std::size_t bytes) : size(bytes + kHuge) {
    raw = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    const auto at = reinterpret_cast<std::uintptr_t>(raw);
    base = reinterpret_cast<char*>((at + kHuge - 1) / kHuge * kHuge);
  }
  ~AlignedMapping() { ::munmap(raw, size); }
  std::size_t size;
  void* raw = nullptr;
  char* base = nullptr;
};

TEST(HugePages, AdvisesTheAlignedInteriorOnly) {
  AlignedMapping m(8 * kHuge);
  ASSERT_NE(m.raw, MAP_FAILED);
  const std::size_t whole = kernel_has_thp() ? 1 : 0;
  EXPECT_EQ(advise_huge_pages(m.base, 4 * kHuge), whole * 4 * kHuge);
  // From 1 byte past a boundary to 1 byte short of another: the two whole pages between.
  EXPECT_EQ(advise_huge_pages(m.base + 1, 4 * kHuge - 2), whole * 2 * kHuge);
  EXPECT_EQ(advise_huge_pages(m.base + kHuge / 2, 2 * kHuge), whole * kHuge);
  // Less than a huge page, or no whole aligned page inside: nothing.
  EXPECT_EQ(advise_huge_pages(m.base, kHuge - 1), 0u);
  EXPECT_EQ(advise_huge_pages(m.base + 1, kHuge), 0u);
  EXPECT_EQ(advise_huge_pages(nullptr, 4 * kHuge), 0u);
  // The contents are the memory's: zero, writable.
  m.base[0] = 7;
  m.base[4 * kHuge - 1] = 9;
  EXPECT_EQ(m.base[0] + m.base[4 * kHuge - 1] + m.base[kHuge], 16);
}

TEST(HugePages, ResizeAndAssignKeepVectorSemantics) {
  std::vector<std::int32_t> v = {3, -1, 4};
  const std::size_t n = 3 * kHuge / sizeof(std::int32_t) + 5;  // grows past a huge page
  resize_huge(v, n);
  ASSERT_EQ(v.size(), n);
  EXPECT_EQ(v[0], 3);
  EXPECT_EQ(v[1], -1);
  EXPECT_EQ(v[2], 4);
  for (std::size_t i = 3; i < n; i += 4099) EXPECT_EQ(v[i], 0) << i;
  EXPECT_EQ(v[n - 1], 0);
  resize_huge(v, 2);  // shrinking, and small sizes, are plain resizes
  EXPECT_EQ(v, (std::vector<std::int32_t>{3, -1}));
  std::vector<std::int16_t> w(5, 2);
  assign_huge(w, kHuge, std::int16_t{-6});
  ASSERT_EQ(w.size(), kHuge);
  for (std::size_t i = 0; i < w.size(); i += 997) EXPECT_EQ(w[i], -6) << i;
  EXPECT_EQ(w.back(), -6);
  assign_huge(w, 3, std::int16_t{1});
  EXPECT_EQ(w, (std::vector<std::int16_t>{1, 1, 1}));
}

}  // namespace
}  // namespace detinfer::core
