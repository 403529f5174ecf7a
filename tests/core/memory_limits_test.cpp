// cgroup memory limits read from fake cgroup trees (v2, v1, hybrid, none): the smallest
// limit along the process's cgroup path and its ancestors; "max" and v1's huge values
// mean no limit; memory_limit_bytes() never exceeds physical memory.
#include "core/memory_limits.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace detinfer {
namespace {

class FakeCgroup {
 public:
  FakeCgroup() {
    const char* base = std::getenv("DETINFER_TEST_TMP");
    root_ = std::string(base != nullptr ? base : "/tmp") + "/cgroup-" +
            std::to_string(static_cast<long>(getpid())) + "-" + std::to_string(counter_++);
    std::system(("rm -rf '" + root_ + "' && mkdir -p '" + root_ + "/fs'").c_str());
  }
  ~FakeCgroup() { std::system(("rm -rf '" + root_ + "'").c_str()); }
  void file(const std::string& rel, const std::string& text) {
    const std::string path = root_ + "/" + rel;
    std::system(("mkdir -p '" + path.substr(0, path.rfind('/')) + "'").c_str());
    std::ofstream(path) << text;
  }
  core::CgroupPaths paths() const { return {root_ + "/fs", root_ + "/self_cgroup"}; }

 private:
  static inline int counter_ = 0;
  std::string root_;
};

TEST(MemoryLimits, CgroupV2ReadsTheSmallestLimitAlongThePath) {
  FakeCgroup g;
  g.file("self_cgroup", "0::/kubepods/pod1/ctr\n");
  g.file("fs/kubepods/memory.max", "8589934592\n");
  g.file("fs/kubepods/pod1/memory.max", "1073741824\n");
  g.file("fs/kubepods/pod1/ctr/memory.max", "max\n");
  EXPECT_EQ(core::cgroup_memory_limit_bytes(g.paths()), 1073741824);
}

TEST(MemoryLimits, CgroupV2NamespacedRootFile) {
  // Inside a container's cgroup namespace the path is "/" and the limit sits at the root.
  FakeCgroup g;
  g.file("self_cgroup", "0::/\n");
  g.file("fs/memory.max", "536870912\n");
  EXPECT_EQ(core::cgroup_memory_limit_bytes(g.paths()), 536870912);
}

TEST(MemoryLimits, CgroupV1MemoryControllerAndUnlimitedValues) {
  FakeCgroup g;
  g.file("self_cgroup", "5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n");
  g.file("fs/memory/memory.limit_in_bytes", "9223372036854771712\n");  // unlimited
  g.file("fs/memory/docker/abc/memory.limit_in_bytes", "2147483648\n");
  EXPECT_EQ(core::cgroup_memory_limit_bytes(g.paths()), 2147483648);
  g.file("fs/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(core::cgroup_memory_limit_bytes(g.paths()), 0);
}

TEST(MemoryLimits, HybridUnifiedMountAndGarbage) {
  FakeCgroup g;
  g.file("self_cgroup", "0::/user.slice\n");
  g.file("fs/unified/user.slice/memory.max", "3221225472");
  EXPECT_EQ(core::cgroup_memory_limit_bytes(g.paths()), 3221225472);
  g.file("fs/unified/user.slice/memory.max", "12abc\n");
  EXPECT_EQ(core::cgroup_memory_limit_bytes(g.paths()), 0);
}

TEST(MemoryLimits, NoCgroupFileMeansPhysicalMemory) {
  FakeCgroup g;  // neither self_cgroup nor any limit exists
  EXPECT_EQ(core::cgroup_memory_limit_bytes(g.paths()), 0);
  EXPECT_GT(core::physical_memory_bytes(), 0);
  EXPECT_EQ(core::memory_limit_bytes(g.paths()), core::physical_memory_bytes());
  FakeCgroup small;
  small.file("self_cgroup", "0::/\n");
  small.file("fs/memory.max", "65536\n");
  EXPECT_EQ(core::memory_limit_bytes(small.paths()), 65536);
  // The real machine: never above physical memory.
  EXPECT_LE(core::memory_limit_bytes(), core::physical_memory_bytes());
  EXPECT_GT(core::memory_limit_bytes(), 0);
}

}  // namespace
}  // namespace detinfer
