// The one field table of SessionOptions. Validation (the ranges open() checks), the C API
// conversion (src/capi/capi_options.cpp), the `detinfer` flags with `--config FILE` and
// `--print-config` (tools/detinfer/cli/session_flags.cpp) and the docs check
// (tests/cli/option_table_test.cpp: every row is documented in docs/cli.md and every
// documented flag exists) all iterate it, so an option added to SessionOptions and to this
// table reaches every one of them. Bindings (Python keyword names) iterate
// for_each_session_field or kSessionFields the same way. docs/cli.md, "Session options".
//
// Members not in the table, and why: chat_template_path and recorder.path (the commands
// that use them have their own --chat-template / --fingerprint), recorder.callback and
// consistency.alarm (functions), recorder.level's kLogits (a debugging level the C API
// does not expose).
#pragma once

#include <cstddef>
#include <cstdint>

#include "detinfer/session.h"

namespace detinfer::session {

// How dti_session_options carries a row: a member of the same meaning copied as is (a bool
// is an int32_t 0/1), converted by hand in capi_options.cpp (an enum code, a NULL-able
// string, the memory tier's -1), or not at all.
enum class CField : std::uint8_t { kCopy, kCustom, kNone };

struct SessionFieldSpec {
  const char* member;    // the member's path in SessionOptions: "cache.prefix.enabled"
  const char* key;       // the config-file key (dotted = nested JSON): "fingerprint.level"
  const char* flag;      // the `detinfer` flag: "--fingerprint-level" (bools add --no-...)
  CField c_field;        // how the C API carries it
  const char* c_member;  // the dti_session_options member ("" for kNone)
  // Integer rows that open() checks: the range [lo, hi]; hi < lo = no range check here
  // (enums and strings are checked by their parsers, cache budgets by the caches).
  std::int64_t lo;
  std::int64_t hi;
  const char* doc;  // one line: the flag's help and the docs/cli.md table's description
  bool ranged() const { return lo <= hi; }
};

constexpr std::int64_t kMaxKvBudgetBytes = std::int64_t{1} << 46;
constexpr std::int64_t kMaxSteps = std::int64_t{1} << 20;

// X(member path, key, flag, C handling, C member, lo, hi, doc), in documentation order.
// `_` stands for "no C member".
#define DETINFER_SESSION_FIELDS(X)                                                             \
  X(mode, "mode", "--mode", kCustom, mode, 0, -1,                                              \
    "Numerics mode: canonical | fast | device_invariant")                                      \
  X(device, "device", "--device", kNone, _, 0, -1,                                             \
    "cpu | cuda | cuda:N (weights, KV cache, kernels)")                                        \
  X(kv_dtype, "kv_dtype", "--kv-dtype", kCustom, kv_dtype, 0, -1,                              \
    "KV cache storage: f32 | bf16 | f16 (rounded to nearest-even, 2 bytes: twice the tokens "  \
    "per --kv-budget-bytes)")                                                                  \
  X(weights, "weights", "--weights", kCustom, weights, 0, -1,                                  \
    "Weights: native | q8_0 | q4_0 | q5_0 | q4_1 | q5_1 | q2_k..q6_k | q3_k_m | q4_k_s | "     \
    "q4_k_m | q5_k_s | q5_k_m (quantized on load; canonical, CPU or CUDA)")                    \
  X(threads, "threads", "--threads", kCopy, threads, 1, 1024,                                  \
    "Kernel threads 1..1024 (0 = all cores)")                                                  \
  X(kv_budget_bytes, "kv_budget_bytes", "--kv-budget-bytes", kCopy, kv_budget_bytes, 0,        \
    kMaxKvBudgetBytes,                                                                         \
    "KV pool bytes (0 = sized from the model and the memory available); bf16/f16 KV holds "    \
    "twice the tokens of f32")                                                                 \
  X(kv_block_size, "kv_block_size", "--kv-block-size", kCopy, kv_block_size, 1, 1024,          \
    "Tokens per KV block 1..1024")                                                             \
  X(max_batch, "max_batch", "--max-batch", kCopy, max_batch, 1, 4096,                          \
    "Sequences decoded per step 1..4096")                                                      \
  X(prefill_chunk_tokens, "prefill_chunk_tokens", "--prefill-chunk-tokens", kCopy,             \
    prefill_chunk_tokens, 1, kMaxSteps, "Prompt tokens per step 1..1048576")                   \
  X(max_queue, "max_queue", "--max-queue", kCopy, max_queue, 1, kMaxSteps,                     \
    "Waiting requests before refusal 1..1048576")                                              \
  X(log_level, "log_level", "--log-level", kCustom, log_level, 0, -1,                          \
    "trace | debug | info | warn | error | critical | off (\"\" = DETINFER_LOG_LEVEL)")        \
  X(cache_salt, "cache_salt", "--cache-salt", kCustom, cache_salt, 0, -1,                      \
    "Mixed into every prefix-cache key")                                                       \
  X(draft_model_path, "speculative.draft_model", "--draft-model", kCustom, draft_model, 0, -1, \
    "Speculative decoding's draft model folder (same tokenizer; used by requests with "        \
    "draft_with_model, e.g. --speculative draft); \"\" = none")                                \
  DETINFER_SESSION_CACHE_FIELDS(X)                                                             \
  DETINFER_SESSION_OBSERVABILITY_FIELDS(X)

#define DETINFER_SESSION_CACHE_FIELDS(X)                                                           \
  X(cache.prefix.enabled, "cache.prefix.enabled", "--prefix-cache", kCopy, prefix_cache, 0, -1,    \
    "KV-prefix cache on/off")                                                                      \
  X(cache.prefix.memory.enabled, "cache.prefix.memory.enabled", "--prefix-cache-memory", kCustom,  \
    prefix_cache_memory_bytes, 0, -1, "Memory tier of the prefix cache")                           \
  X(cache.prefix.memory.budget_bytes, "cache.prefix.memory.budget_bytes",                          \
    "--prefix-cache-memory-bytes", kCustom, prefix_cache_memory_bytes, 0, -1,                      \
    "Memory tier bytes (0 = 20% of the memory limit)")                                             \
  X(cache.prefix.memory.ttl_seconds, "cache.prefix.memory.ttl_seconds", "--prefix-cache-ttl",      \
    kNone, _, 0, -1, "Memory tier TTL in seconds (0 = none)")                                      \
  X(cache.prefix.disk.directory, "cache.prefix.disk.directory", "--cache-dir", kCustom,            \
    disk_cache_dir, 0, -1, "Disk tier folder (\"\" = no disk tier)")                               \
  X(cache.prefix.disk.budget_bytes, "cache.prefix.disk.budget_bytes", "--cache-dir-bytes", kCopy,  \
    disk_cache_bytes, 0, -1, "Disk tier bytes")                                                    \
  X(cache.prefix.redis.enabled, "cache.prefix.redis.enabled", "--prefix-cache-redis", kCopy,       \
    prefix_cache_redis, 0, -1, "Redis tier of the prefix cache (needs --redis-host)")              \
  X(cache.prefix.redis.ttl_seconds, "cache.prefix.redis.ttl_seconds", "--prefix-cache-redis-ttl",  \
    kNone, _, 0, -1, "Redis tier TTL in seconds (>= 1)")                                           \
  X(cache.prefix.redis.key_prefix, "cache.prefix.redis.key_prefix", "--prefix-cache-redis-prefix", \
    kNone, _, 0, -1, "Redis key prefix of KV blocks")                                              \
  X(cache.prefix.error_log_interval_seconds, "cache.prefix.error_log_interval_seconds",            \
    "--cache-error-log-interval", kNone, _, 0, -1,                                                 \
    "A failing tier logs at most once per this many seconds")                                      \
  X(cache.result.enabled, "cache.result.enabled", "--result-cache", kCopy, result_cache, 0, -1,    \
    "Result cache (canonical, fully deterministic requests)")                                      \
  X(cache.result.memory_budget_bytes, "cache.result.memory_budget_bytes", "--result-cache-bytes",  \
    kCopy, result_cache_memory_bytes, 0, -1, "Result cache memory bytes")                          \
  X(cache.result.ttl_seconds, "cache.result.ttl_seconds", "--result-cache-ttl", kNone, _, 0, -1,   \
    "Result cache TTL in seconds (0 = none)")                                                      \
  X(cache.result.use_redis, "cache.result.use_redis", "--result-cache-redis", kCopy,               \
    result_cache_redis, 0, -1, "Also store results in Redis (needs --redis-host)")                 \
  X(cache.result.redis_key_prefix, "cache.result.redis_key_prefix", "--result-cache-redis-prefix", \
    kNone, _, 0, -1, "Redis key prefix of results")                                                \
  X(cache.result.audit_fraction, "cache.result.audit_fraction", "--result-cache-audit", kNone, _,  \
    0, -1, "Fraction [0, 1] of result-cache hits recomputed and compared")                         \
  X(cache.redis.host, "cache.redis.host", "--redis-host", kCustom, redis_host, 0, -1,              \
    "Redis host (\"\" = no Redis)")                                                                \
  X(cache.redis.port, "cache.redis.port", "--redis-port", kCopy, redis_port, 0, -1, "Redis port")  \
  X(cache.redis.connect_timeout_ms, "cache.redis.connect_timeout_ms",                              \
    "--redis-connect-timeout-ms", kNone, _, 0, -1, "Per connection attempt")                       \
  X(cache.redis.command_timeout_ms, "cache.redis.command_timeout_ms",                              \
    "--redis-command-timeout-ms", kNone, _, 0, -1, "Per GET/SET/DEL")                              \
  X(cache.redis.reconnect_backoff_min_ms, "cache.redis.reconnect_backoff_min_ms",                  \
    "--redis-backoff-min-ms", kNone, _, 0, -1, "First wait after a Redis failure")                 \
  X(cache.redis.reconnect_backoff_max_ms, "cache.redis.reconnect_backoff_max_ms",                  \
    "--redis-backoff-max-ms", kNone, _, 0, -1, "Longest wait after Redis failures")

#define DETINFER_SESSION_OBSERVABILITY_FIELDS(X)                                                   \
  X(recorder.level, "fingerprint.level", "--fingerprint-level", kCustom, fingerprint_level, 0, -1, \
    "Fingerprint level: off | final | steps | logits")                                             \
  X(recorder.store_prompt_tokens, "fingerprint.store_prompt_tokens",                               \
    "--fingerprint-prompt-tokens", kNone, _, 0, -1,                                                \
    "Fingerprints keep the prompt ids (else only their hash)")                                     \
  X(distribution_interval, "distribution.interval", "--distribution-interval", kNone, _, 0,        \
    kMaxSteps, "Top-1 probability/entropy metrics of every Nth token (0 = off)")                   \
  X(distribution_window, "distribution.window", "--distribution-window", kNone, _, 2, kMaxSteps,   \
    "Sampled tokens the top-1 variance gauge covers")                                              \
  X(consistency.enabled, "consistency.enabled", "--consistency-monitor", kNone, _, 0, -1,          \
    "Shadow-replay a sample of requests and track the consistency ratio")                          \
  X(consistency.monitor.sample_rate, "consistency.sample_rate", "--consistency-sample-rate",       \
    kNone, _, 0, -1, "Fraction [0, 1] of requests replayed")                                       \
  X(consistency.monitor.sampling_salt, "consistency.sampling_salt", "--consistency-sampling-salt", \
    kNone, _, 0, -1, "Salt of the deterministic sample")                                           \
  X(consistency.monitor.threshold, "consistency.alert_below", "--consistency-alert-below", kNone,  \
    _, 0, -1, "Ratio below which the monitor alerts (metric, log, alarm)")                         \
  X(consistency.monitor.min_checks, "consistency.min_checks", "--consistency-min-checks", kNone,   \
    _, 0, -1, "Checks before any alert or failure")                                                \
  X(consistency.monitor.queue_capacity, "consistency.queue_capacity", "--consistency-queue",       \
    kNone, _, 0, -1, "Sampled requests waiting for replay before dropping")                        \
  X(consistency.monitor.low_priority, "consistency.low_priority", "--consistency-low-priority",    \
    kNone, _, 0, -1, "Replay at idle CPU priority")

// Every row as data, in table order (for bindings, docs checks and tests).
inline constexpr SessionFieldSpec kSessionFields[] = {
#define DETINFER_SESSION_SPEC(member, key, flag, c_field, c_member, lo, hi, doc)           \
  {#member, key, flag, CField::c_field, CField::c_field == CField::kNone ? "" : #c_member, \
   lo,      hi,  doc},
    DETINFER_SESSION_FIELDS(DETINFER_SESSION_SPEC)
#undef DETINFER_SESSION_SPEC
};
constexpr std::size_t kSessionFieldCount = sizeof(kSessionFields) / sizeof(kSessionFields[0]);

// Calls visit(const SessionFieldSpec&, member) for every row, in table order. `Options` is
// SessionOptions or const SessionOptions; the member is passed by reference.
template <typename Options, typename Visit>
void for_each_session_field(Options& options, Visit&& visit) {
  std::size_t i = 0;
#define DETINFER_SESSION_VISIT(member, ...) visit(kSessionFields[i++], options.member);
  DETINFER_SESSION_FIELDS(DETINFER_SESSION_VISIT)
#undef DETINFER_SESSION_VISIT
}

// Throws Error(kInvalidArgument, field = the member) for the first ranged row out of its
// range: "SessionOptions.<member> must be in [lo, hi], got v".
void check_session_ranges(const SessionOptions& options);

}  // namespace detinfer::session
