// Options and statistics of detinfer's caches: the KV-prefix cache (memory, disk and Redis
// tiers) and the result cache. docs/cache.md describes keys, tiers and failure handling.
#pragma once

#include <cstdint>
#include <string>

namespace detinfer {

// Connection to a Redis server shared by several processes. An empty host disables Redis.
struct RedisOptions {
  std::string host;                               // e.g. "127.0.0.1"; empty = no Redis tier
  std::int32_t port = 6379;                       // 1..65535
  std::int32_t connect_timeout_ms = 50;           // per connection attempt
  std::int32_t command_timeout_ms = 50;           // per GET/SET/DEL
  std::int32_t reconnect_backoff_min_ms = 100;    // first wait after a failure
  std::int32_t reconnect_backoff_max_ms = 10000;  // the wait doubles up to this
};

// In-process tier: copies of KV blocks in RAM.
struct MemoryTierOptions {
  bool enabled = true;
  std::int64_t budget_bytes = 0;  // 0 = 20% of physical memory; never exceeded
  double ttl_seconds = 3600;      // entries older than this are never served; 0 = no TTL
};

// Optional on-disk tier: one file per block, survives restarts.
struct DiskTierOptions {
  std::string directory;                   // empty = no disk tier; created if missing
  std::int64_t budget_bytes = 10LL << 30;  // LRU by access time beyond this (10 GiB)
};

// Optional Redis tier (needs RedisOptions::host).
struct RedisTierOptions {
  bool enabled = false;
  std::int32_t ttl_seconds = 3600;          // SET ... EX ttl; >= 1
  std::string key_prefix = "detinfer:kv:";  // keys are <prefix><model fp>:<block key>
};

struct PrefixCacheOptions {
  bool enabled = true;
  MemoryTierOptions memory;
  DiskTierOptions disk;
  RedisTierOptions redis;
  double error_log_interval_seconds = 60;  // a failing tier logs at most once per interval
};

struct ResultCacheOptions {
  bool enabled = false;                               // only for fully deterministic requests
  std::int64_t memory_budget_bytes = 256LL << 20;     // 256 MiB
  double ttl_seconds = 3600;                          // 0 = no TTL
  bool use_redis = false;                             // also store in Redis (RedisOptions)
  std::string redis_key_prefix = "detinfer:result:";  // keys are <prefix><model fp>:<key>
  // Fraction [0, 1] of hits the engine recomputes and compares; the choice is a pure
  // function of the key, so it is reproducible.
  double audit_fraction = 0.0;
};

struct CacheOptions {
  PrefixCacheOptions prefix;
  ResultCacheOptions result;
  RedisOptions redis;  // shared by the prefix and the result cache
};

// Counters of one tier since the cache was created. Hits and misses count lookups of one
// block (prefix cache) or one result (result cache); tokens = blocks * block size.
struct CacheTierStats {
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  std::int64_t hit_tokens = 0;
  std::int64_t miss_tokens = 0;
  std::int64_t insertions = 0;
  std::int64_t rejected = 0;        // insertions not stored (larger than the budget, all pinned)
  std::int64_t budget_bytes = 0;    // configured byte budget (0 for Redis: not tracked)
  std::int64_t bytes = 0;           // current bytes held; disk counts headers too
  std::int64_t entries = 0;         // current entries held (0 for Redis: not tracked)
  std::int64_t evictions = 0;       // removed to stay within the budget
  std::int64_t expirations = 0;     // found past their TTL and dropped
  std::int64_t corrupt = 0;         // failed validation; deleted and treated as a miss
  std::int64_t backend_errors = 0;  // I/O or connection failures; treated as a miss
};

struct PrefixCacheStats {
  CacheTierStats memory;
  CacheTierStats disk;
  CacheTierStats redis;
  std::int64_t lookups = 0;
  std::int64_t lookup_tokens = 0;  // prompt tokens asked about
  std::int64_t cached_tokens = 0;  // prompt tokens served from any tier
};

struct ResultCacheStats {
  CacheTierStats memory;
  CacheTierStats redis;
  std::int64_t audits = 0;            // hits recomputed and compared
  std::int64_t audit_mismatches = 0;  // recomputation differed: error event
};

struct CacheStats {
  PrefixCacheStats prefix;
  ResultCacheStats result;
};

}  // namespace detinfer
