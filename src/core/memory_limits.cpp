#include "core/memory_limits.h"

#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

namespace detinfer::core {

namespace {

// The number in a limit file; -1 for "max", a missing file or anything unparsable.
std::int64_t read_limit(const std::string& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max") return -1;
  std::int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || v > (INT64_MAX - 9) / 10) return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

// `path` and each of its ancestors, deepest first: /a/b -> /a/b, /a, "".
std::vector<std::string> self_and_ancestors(std::string path) {
  std::vector<std::string> out;
  while (!path.empty() && path.back() == '/') path.pop_back();
  for (;;) {
    out.push_back(path);
    const auto slash = path.rfind('/');
    if (slash == std::string::npos || path.empty()) break;
    path.resize(slash);
  }
  return out;
}

// Smallest limit below `base` along `cgroup_path` (file `name` in each directory).
std::int64_t smallest_limit(const std::string& base, const std::string& cgroup_path,
                            const char* name, std::int64_t unlimited_from) {
  std::int64_t best = 0;
  for (const std::string& dir : self_and_ancestors(cgroup_path)) {
    const std::int64_t v = read_limit(base + dir + "/" + name);
    if (v <= 0 || v >= unlimited_from) continue;
    best = best == 0 ? v : std::min(best, v);
  }
  return best;
}

}  // namespace

std::int64_t cgroup_memory_limit_bytes(const CgroupPaths& paths) {
  std::ifstream in(paths.self_cgroup);
  std::int64_t best = 0;
  auto take = [&best](std::int64_t v) {
    if (v > 0) best = best == 0 ? v : std::min(best, v);
  };
  for (std::string line; std::getline(in, line);) {
    const auto c1 = line.find(':');
    const auto c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    const std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string path = line.substr(c2 + 1);
    if (line.compare(0, c1, "0") == 0 && controllers.empty()) {
      // v2 (unified): the root itself, or its "unified" mount on a hybrid system.
      take(smallest_limit(paths.root, path, "memory.max", INT64_MAX));
      take(smallest_limit(paths.root + "/unified", path, "memory.max", INT64_MAX));
    } else {
      std::stringstream list(controllers);
      for (std::string c; std::getline(list, c, ',');) {
        if (c == "memory") {
          take(smallest_limit(paths.root + "/memory", path, "memory.limit_in_bytes",
                              std::int64_t{1} << 62));
        }
      }
    }
  }
  return best;
}

std::int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<std::int64_t>(pages) * static_cast<std::int64_t>(page_size);
}

std::int64_t memory_limit_bytes(const CgroupPaths& paths) {
  const std::int64_t physical = physical_memory_bytes();
  const std::int64_t cgroup = cgroup_memory_limit_bytes(paths);
  if (physical == 0) return cgroup;
  if (cgroup == 0) return physical;
  return std::min(physical, cgroup);
}

void release_free_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

void limit_heap_arenas(int n) {
#if defined(__GLIBC__)
  mallopt(M_ARENA_MAX, n);
#else
  (void)n;
#endif
}

}  // namespace detinfer::core
