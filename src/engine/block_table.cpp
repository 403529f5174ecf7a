#include "engine/block_table.h"

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
    pool.retain(table[i]);
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
  for (const std::int32_t b : table) pool.release(b);
  table.clear();
}

}  // namespace detinfer::engine
