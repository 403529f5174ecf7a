// How much memory this process may use: physical memory, capped by the memory limit of
// its cgroup (v2 memory.max, v1 memory.limit_in_bytes) so that budgets sized as a
// fraction of "memory" fit a container's limit instead of the host's RAM.
#pragma once

#include <cstdint>
#include <string>

namespace detinfer::core {

// Where the cgroup file systems and the process's cgroup membership are read from;
// tests point these at a fake tree.
struct CgroupPaths {
  std::string root = "/sys/fs/cgroup";            // v2 unified root, or the v1 controllers' parent
  std::string self_cgroup = "/proc/self/cgroup";  // "<id>:<controllers>:<path>" lines
};

// The smallest memory limit set on the process's cgroup or any ancestor (v2: the
// unified hierarchy's memory.max, "max" = none; v1: the memory controller's
// memory.limit_in_bytes, values >= 2^62 = none). 0 when no limit is set or readable.
std::int64_t cgroup_memory_limit_bytes(const CgroupPaths& paths = {});

// Physical memory (sysconf), or 0 when unknown.
std::int64_t physical_memory_bytes();

// min(physical memory, cgroup limit), ignoring whichever is unknown; 0 when both are.
std::int64_t memory_limit_bytes(const CgroupPaths& paths = {});

// Gives the pages of freed heap memory back to the operating system (glibc: malloc_trim;
// elsewhere nothing). Loading a large tokenizer.json frees a parse tree of several times
// the file's size among allocations that live on; without this the process keeps those
// pages (e.g. 245 MB for a 152k-token vocabulary).
void release_free_heap();

// Caps glibc's malloc arenas at `n` (elsewhere nothing). A server with 64 request threads
// otherwise spreads freed memory over up to 8 arenas per core, which release_free_heap
// cannot all give back (issue 33: RSS stayed 20% above idle after 64 large requests).
void limit_heap_arenas(int n);

}  // namespace detinfer::core
