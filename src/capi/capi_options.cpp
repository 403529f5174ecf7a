// The C option structs: their defaults (the C++ defaults) and their conversion, for every
// released struct_size.
#include <initializer_list>
#include <string>

#include "capi/capi_internal.h"

// The first released layouts: a caller compiled against 0.1's c_api.h passes these sizes.
static_assert(DTI_SESSION_OPTIONS_SIZE_V1 == 48, "dti_session_options v1 layout changed");
static_assert(DTI_GENERATION_CONFIG_SIZE_V1 == sizeof(dti_generation_config),
              "dti_generation_config grew: add a DTI_GENERATION_CONFIG_SIZE_V2");

namespace detinfer::capi {
namespace {

// Copies the caller's version of a struct over the defaults in *out: the fields its
// version lacks keep their defaults. Accepts exactly the sizes of released versions.
template <typename T>
dti_status read_versioned(const char* function, const char* type, const T& in,
                          std::initializer_list<std::uint32_t> sizes, T* out) {
  bool known = false;
  std::string list;
  for (std::uint32_t s : sizes) {
    known = known || in.struct_size == s;
    list += (list.empty() ? "" : ", ") + std::to_string(s);
  }
  if (!known) {
    return set_error(DTI_INVALID_ARGUMENT, std::string(function) + ": " + type +
                                               ".struct_size is " + std::to_string(in.struct_size) +
                                               ", expected one of " + list +
                                               " (initialize it with " + type + "_default())");
  }
  std::memcpy(static_cast<void*>(out), &in, in.struct_size);
  out->struct_size = sizeof(T);
  return DTI_OK;
}

// One range rule of dti_session_options: `field` must lie in [lo, hi].
struct RangeRule {
  const char* field;
  std::int64_t value;
  std::int64_t lo;
  std::int64_t hi;
  const char* meaning;
};

dti_status check_ranges(const char* function, std::initializer_list<RangeRule> rules) {
  for (const RangeRule& r : rules) {
    if (r.value < r.lo || r.value > r.hi) {
      return set_error(DTI_INVALID_ARGUMENT, std::string(function) + ": dti_session_options." +
                                                 r.field + " must be " + r.meaning + ", got " +
                                                 std::to_string(r.value));
    }
  }
  return DTI_OK;
}

void to_cache_options(const dti_session_options& c, SessionOptions* out) {
  CacheOptions& cache = out->cache;
  cache.prefix.enabled = c.prefix_cache != 0;
  cache.prefix.memory.enabled = c.prefix_cache_memory_bytes >= 0;
  if (c.prefix_cache_memory_bytes > 0) {
    cache.prefix.memory.budget_bytes = c.prefix_cache_memory_bytes;
  }
  if (c.disk_cache_dir != nullptr) cache.prefix.disk.directory = c.disk_cache_dir;
  cache.prefix.disk.budget_bytes = c.disk_cache_bytes;
  cache.prefix.redis.enabled = c.prefix_cache_redis != 0;
  cache.result.enabled = c.result_cache != 0;
  cache.result.memory_budget_bytes = c.result_cache_memory_bytes;
  cache.result.use_redis = c.result_cache_redis != 0;
  if (c.redis_host != nullptr) cache.redis.host = c.redis_host;
  cache.redis.port = c.redis_port;
  if (c.cache_salt != nullptr) out->cache_salt = c.cache_salt;
}

}  // namespace

dti_status to_session_options(const char* fn, const dti_session_options* in, SessionOptions* out) {
  dti_session_options c = dti_session_options_default();
  if (in != nullptr) {
    if (dti_status s = read_versioned(
            fn, "dti_session_options", *in,
            {DTI_SESSION_OPTIONS_SIZE_V1, DTI_SESSION_OPTIONS_SIZE_V2, sizeof(dti_session_options)},
            &c);
        s != DTI_OK) {
      return s;
    }
  }
  if (dti_status s = check_ranges(
          fn, {{"mode", c.mode, 0, 1, "0 (canonical) or 1 (fast)"},
               {"log_level", c.log_level, -1, 6, "in [-1, 6]"},
               {"kv_dtype", c.kv_dtype, 0, 2, "0 (f32), 1 (bf16) or 2 (f16)"},
               {"fingerprint_level", c.fingerprint_level, 0, 2, "0 (off), 1 (final) or 2 (steps)"},
               {"prefix_cache_memory_bytes", c.prefix_cache_memory_bytes, -1, INT64_MAX,
                ">= -1 (-1 = no memory tier, 0 = auto)"}});
      s != DTI_OK) {
    return s;
  }
  // The session's own recorder fills GenerationResult::fingerprint_json (in memory).
  out->recorder.level = static_cast<RecordLevel>(c.fingerprint_level);
  out->mode = c.mode == DTI_MODE_FAST ? NumericsMode::kFast : NumericsMode::kCanonical;
  out->threads = c.threads;
  out->kv_dtype = static_cast<KvDType>(c.kv_dtype);
  out->kv_budget_bytes = c.kv_budget_bytes;
  out->kv_block_size = c.kv_block_size;
  out->max_batch = c.max_batch;
  out->prefill_chunk_tokens = c.prefill_chunk_tokens;
  out->max_queue = c.max_queue;
  if (c.log_level >= 0) out->log_level = static_cast<LogLevel>(c.log_level);
  to_cache_options(c, out);
  return DTI_OK;
}

dti_status to_generation_config(const char* function, const dti_generation_config* in,
                                GenerationConfig* out) {
  if (in == nullptr) return DTI_OK;  // defaults
  dti_generation_config c = dti_generation_config_default();
  if (dti_status s = read_versioned(function, "dti_generation_config", *in,
                                    {DTI_GENERATION_CONFIG_SIZE_V1}, &c);
      s != DTI_OK) {
    return s;
  }
  out->max_new_tokens = c.max_new_tokens;
  out->temperature = c.temperature;
  out->top_k = c.top_k;
  out->top_p = c.top_p;
  out->min_p = c.min_p;
  out->repetition_penalty = c.repetition_penalty;
  out->presence_penalty = c.presence_penalty;
  out->frequency_penalty = c.frequency_penalty;
  if (c.has_seed != 0) out->seed = c.seed;
  out->num_return_sequences = c.num_return_sequences;
  out->first_sample_index = c.first_sample_index;
  out->num_beams = c.num_beams;
  out->length_penalty = c.length_penalty;
  out->early_stopping = c.early_stopping != 0;
  if (c.stop_token_ids != nullptr) {
    out->stop_token_ids.emplace(c.stop_token_ids, c.stop_token_ids + c.num_stop_token_ids);
  } else if (c.num_stop_token_ids != 0) {
    return set_error(DTI_INVALID_ARGUMENT,
                     std::string(function) + ": stop_token_ids is NULL but num_stop_token_ids is " +
                         std::to_string(c.num_stop_token_ids));
  }
  if (c.num_stop_strings != 0 && c.stop_strings == nullptr) {
    return null_argument(function, "stop_strings");
  }
  for (std::size_t i = 0; i < c.num_stop_strings; ++i) {
    if (c.stop_strings[i] == nullptr) {
      return set_error(DTI_INVALID_ARGUMENT,
                       std::string(function) + ": stop_strings[" + std::to_string(i) + "] is NULL");
    }
    out->stop_strings.emplace_back(c.stop_strings[i]);
  }
  out->logprobs = c.logprobs;
  out->ignore_eos = c.ignore_eos != 0;
  return DTI_OK;
}

TokenCallback to_callback(dti_token_callback cb, void* user_data) {
  if (cb == nullptr) return {};
  return [cb, user_data](const TokenEvent& e) {
    return cb(user_data, e.token, e.text.c_str(), e.text.size(), e.sample_index, e.step) != 0;
  };
}

}  // namespace detinfer::capi

extern "C" {

dti_session_options dti_session_options_default(void) {
  const detinfer::SessionOptions d;
  dti_session_options o{};
  o.struct_size = sizeof(dti_session_options);
  o.mode = DTI_MODE_CANONICAL;
  o.threads = d.threads;
  o.kv_budget_bytes = d.kv_budget_bytes;
  o.kv_block_size = d.kv_block_size;
  o.max_batch = d.max_batch;
  o.prefill_chunk_tokens = d.prefill_chunk_tokens;
  o.max_queue = d.max_queue;
  o.log_level = -1;
  o.fingerprint_level = static_cast<int32_t>(d.recorder.level);  // as in C++: steps
  const detinfer::CacheOptions& cache = d.cache;
  o.prefix_cache = cache.prefix.enabled ? 1 : 0;
  o.prefix_cache_memory_bytes = cache.prefix.memory.enabled ? cache.prefix.memory.budget_bytes : -1;
  o.disk_cache_dir = nullptr;
  o.disk_cache_bytes = cache.prefix.disk.budget_bytes;
  o.prefix_cache_redis = cache.prefix.redis.enabled ? 1 : 0;
  o.result_cache = cache.result.enabled ? 1 : 0;
  o.result_cache_memory_bytes = cache.result.memory_budget_bytes;
  o.result_cache_redis = cache.result.use_redis ? 1 : 0;
  o.redis_host = nullptr;
  o.redis_port = cache.redis.port;
  o.cache_salt = nullptr;
  o.kv_dtype = static_cast<int32_t>(d.kv_dtype);
  return o;
}

dti_generation_config dti_generation_config_default(void) {
  const detinfer::GenerationConfig d;
  dti_generation_config c{};
  c.struct_size = sizeof(dti_generation_config);
  c.max_new_tokens = d.max_new_tokens;
  c.temperature = d.temperature;
  c.top_k = d.top_k;
  c.top_p = d.top_p;
  c.min_p = d.min_p;
  c.repetition_penalty = d.repetition_penalty;
  c.presence_penalty = d.presence_penalty;
  c.frequency_penalty = d.frequency_penalty;
  c.has_seed = 0;
  c.seed = 0;
  c.num_return_sequences = d.num_return_sequences;
  c.first_sample_index = d.first_sample_index;
  c.num_beams = d.num_beams;
  c.length_penalty = d.length_penalty;
  c.early_stopping = d.early_stopping ? 1 : 0;
  c.logprobs = d.logprobs;
  c.ignore_eos = d.ignore_eos ? 1 : 0;
  return c;
}

}  // extern "C"
