// Glue between the prefix cache and a paged KV pool, for the engine's PrefixProvider seam
// (engine/engine_hooks.h). Templates over the pool so that this module does not link the
// model (and libtorch): Pool is KvCachePool or anything with the same members —
// block_bytes(), free_blocks(), allocate(), import_block(id, src), export_block(id, dst).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "cache/prefix_cache.h"

namespace detinfer::cache {

// At admission: allocates pool blocks for the longest cached chain of the prompt's full
// blocks (always leaving the last prompt token to prefill), copies the cached K/V into
// them and appends them to block_table (empty on entry). Returns the prompt tokens
// covered, a multiple of the block size. Stops early, never throws, when the pool runs
// out of free blocks: the engine then prefills more.
template <typename Pool>
std::int64_t restore_prefix_blocks(PrefixCache& cache, const std::vector<std::int32_t>& prompt,
                                   std::string_view salt, Pool& pool,
                                   std::vector<std::int32_t>& block_table) {
  const PrefixMatch m = cache.lookup(prompt, salt);
  std::size_t restored = 0;
  for (; restored < m.blocks.size() && pool.free_blocks() > 0; ++restored) {
    const std::int32_t block = pool.allocate();
    pool.import_block(block, m.blocks[restored]->data());
    block_table.push_back(block);
  }
  return static_cast<std::int64_t>(restored) * m.block_size;
}

// After the prompt is prefilled: stores every full prompt block not yet in the fastest
// tier (block i of the prompt is block_table[i]). Returns the number of blocks inserted.
template <typename Pool>
std::int64_t publish_prefix_blocks(PrefixCache& cache, const std::vector<std::int32_t>& prompt,
                                   std::string_view salt, const Pool& pool,
                                   const std::vector<std::int32_t>& block_table) {
  if (!cache.enabled()) return 0;
  const std::vector<Hash128> keys = cache.block_keys(prompt, salt);
  const std::size_t n = std::min(keys.size(), block_table.size());
  std::int64_t inserted = 0;
  for (std::size_t i = 0; i < n; ++i) {
    // A hole (-1): a sliding window's block the engine released; nothing to publish.
    if (block_table[i] < 0 || cache.contains(keys[i])) continue;
    auto payload = std::make_shared<Bytes>(static_cast<std::size_t>(pool.block_bytes()));
    pool.export_block(block_table[i], payload->data());
    cache.insert(keys[i], std::move(payload));
    ++inserted;
  }
  return inserted;
}

}  // namespace detinfer::cache
