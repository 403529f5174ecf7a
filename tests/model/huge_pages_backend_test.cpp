// Which host buffers get the huge-page advice (core/huge_pages.h): the CPU backend's dense
// buffers do, the KV pool's (Backend::Touch::kGrowing) do not. Read from the mappings'
// VmFlags in /proc/self/smaps ("hg": madvise(MADV_HUGEPAGE)), which record the advice
// whether or not the kernel then finds free huge pages.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "core/huge_pages.h"
#include "model/backend.h"
#include "model/model.h"

namespace detinfer {
namespace {

// Whether the mapping that holds `p` carries the huge-page advice; nothing when no mapping
// holds it or smaps is unreadable.
std::optional<bool> advised_huge(const void* p) {
  std::ifstream in("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) {
      return (line + " ").find(" hg ") != std::string::npos;
    }
  }
  return std::nullopt;
}

// The first 2 MiB boundary inside [p, p + 2 MiB).
const void* first_huge_boundary(const void* p) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t h = core::kHugePageBytes;
  return reinterpret_cast<const void*>((at + h - 1) / h * h);
}

TEST(HugePagesBackend, DenseBuffersAreAdvisedTheKvPoolIsNot) {
  // Without transparent huge pages in the kernel madvise refuses the advice: no flag.
  const bool thp = std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled");
  const std::shared_ptr<model::Backend> cpu = model::make_cpu_backend(1);
  constexpr std::size_t kBytes = 16 * core::kHugePageBytes;
  model::BackendBuffer dense = cpu->alloc(kBytes);
  model::BackendBuffer growing = cpu->alloc(kBytes, model::Backend::Touch::kGrowing);
  EXPECT_EQ(advised_huge(first_huge_boundary(dense.data())), std::optional<bool>(thp));
  EXPECT_EQ(advised_huge(first_huge_boundary(growing.data())), std::optional<bool>(false));
  // Small buffers are never advised (less than one huge page).
  model::BackendBuffer small = cpu->alloc(4096);
  EXPECT_NE(advised_huge(small.data()), std::optional<bool>(true));

  model::ModelConfig c;
  c.num_layers = 2;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  model::KvCachePool pool(c, 16, std::int64_t{64} << 20, cpu);
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    EXPECT_EQ(advised_huge(first_huge_boundary(pool.k_pool(l))), std::optional<bool>(false)) << l;
  }
}

}  // namespace
}  // namespace detinfer
