#include "engine/block_table.h"

#include <algorithm>

#include "model/model.h"

namespace detinfer::engine {

void ensure_blocks(model::KvCachePool& pool, std::vector<std::int32_t>& table,
                   std::int64_t tokens) {
  const std::int64_t bs = pool.block_size();
  while (static_cast<std::int64_t>(table.size()) * bs < tokens) table.push_back(pool.allocate());
}

std::vector<std::int32_t> fork_blocks(model::KvCachePool& pool,
                                      const std::vector<std::int32_t>& table, std::int64_t tokens) {
  const std::int64_t bs = pool.block_size();
  const std::int64_t full = tokens / bs;
  std::vector<std::int32_t> child;
  child.reserve(table.size());
  for (std::int64_t i = 0; i < full; ++i) {
    if (table[i] >= 0) pool.retain(table[i]);
    child.push_back(table[i]);
  }
  if (tokens % bs != 0) {
    // The partial block will be written by the child: it gets its own copy.
    std::vector<unsigned char> buf(static_cast<std::size_t>(pool.block_bytes()));
    const std::int32_t copy = pool.allocate();
    pool.export_block(table[full], buf.data());
    pool.import_block(copy, buf.data());
    child.push_back(copy);
  }
  return child;
}

void release_blocks(model::KvCachePool& pool, std::vector<std::int32_t>& table) {
  for (const std::int32_t b : table) {
    if (b >= 0) pool.release(b);
  }
  table.clear();
}

std::int64_t release_before(model::KvCachePool& pool, std::vector<std::int32_t>& table,
                            std::int64_t first_live) {
  // Holes are always a prefix of the table (released front to back, copied as they are by
  // forks): walk back from first_live to the last hole, so a step costs only what it frees.
  std::int64_t released = 0;
  for (auto i = std::min<std::int64_t>(first_live, static_cast<std::int64_t>(table.size())) - 1;
       i >= 0 && table[i] >= 0; --i) {
    pool.release(table[i]);
    table[i] = -1;
    ++released;
  }
  return released;
}

std::int64_t live_blocks(const std::vector<std::int32_t>& table) {
  return std::count_if(table.begin(), table.end(), [](std::int32_t b) { return b >= 0; });
}

}  // namespace detinfer::engine
