// Block-table operations on the KV pool: growing a sequence's table, forking it (full
// blocks shared by reference count, the partial last block copied) and releasing it.
#pragma once

#include <cstdint>
#include <vector>

namespace detinfer::model {
class KvCachePool;
}  // namespace detinfer::model

namespace detinfer::engine {

// Appends blocks until the table covers `tokens` tokens.
void ensure_blocks(model::KvCachePool& pool, std::vector<std::int32_t>& table, std::int64_t tokens);

// A table for a child sequence that continues from the first `tokens` tokens of `table`.
std::vector<std::int32_t> fork_blocks(model::KvCachePool& pool,
                                      const std::vector<std::int32_t>& table, std::int64_t tokens);

// Drops one reference to every block and clears the table.
void release_blocks(model::KvCachePool& pool, std::vector<std::int32_t>& table);

}  // namespace detinfer::engine
