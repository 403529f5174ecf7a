// Block-table operations on the KV pool: growing a sequence's table, forking it (full
// blocks shared by reference count, the partial last block copied), releasing it, and
// releasing the blocks a sliding window no longer sees (entries -1: holes).
#pragma once

#include <cstdint>
#include <vector>

namespace detinfer::model {
class KvCachePool;
}  // namespace detinfer::model

namespace detinfer::engine {

// Appends blocks until the table covers `tokens` tokens.
void ensure_blocks(model::KvCachePool& pool, std::vector<std::int32_t>& table, std::int64_t tokens);

// A table for a child sequence that continues from the first `tokens` tokens of `table`
// (its holes stay holes).
std::vector<std::int32_t> fork_blocks(model::KvCachePool& pool,
                                      const std::vector<std::int32_t>& table, std::int64_t tokens);

// Drops one reference to every block and clears the table.
void release_blocks(model::KvCachePool& pool, std::vector<std::int32_t>& table);

// A sliding window's dead blocks: drops the reference to every block before entry
// `first_live` and marks its entry -1 (a hole: the table keeps its length, so entry i
// still covers tokens [i * block_size, (i + 1) * block_size)). The holes of a table are
// always a prefix of it. Returns the blocks released.
std::int64_t release_before(model::KvCachePool& pool, std::vector<std::int32_t>& table,
                            std::int64_t first_live);

// Blocks a table holds (its entries that are not holes).
std::int64_t live_blocks(const std::vector<std::int32_t>& table);

}  // namespace detinfer::engine
