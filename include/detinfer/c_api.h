/* detinfer's C ABI (C11 and C++): a DeterministicSession behind opaque handles, for other
 * languages (FFI) and engines written in C. docs/embedding.md, route 2.
 *
 * Rules:
 *  - Every function that can fail returns a dti_status; DTI_OK is 0. Nothing throws or
 *    aborts across this boundary. On failure, dti_last_error() returns a message naming
 *    the argument, field, file or value at fault; it is per thread and stays valid until
 *    the next failing call on that thread.
 *  - Option structs are initialized with their *_default() function, then edited. Their
 *    first field, struct_size, lets later versions add fields at the end: the library
 *    accepts the struct_size of every version of the struct (DTI_*_SIZE_V1 up to the
 *    current sizeof) and fills the fields a caller's version lacks from the defaults.
 *  - Objects returned through an out-pointer belong to the caller and are released with
 *    the matching free function (dti_session_close, dti_result_free, dti_string_free).
 *    Pointers into a dti_result stay valid until it is freed.
 *  - A dti_session may be used from any number of threads at once; requests are batched
 *    together without changing a bit of any of them (canonical mode).
 *  - The library never writes to stdout. Log records go to stderr, or to the callback
 *    set with dti_log_set.
 */
#ifndef DETINFER_C_API_H_
#define DETINFER_C_API_H_

#include <stddef.h>
#include <stdint.h>

#include "detinfer/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: the numbers of detinfer::ErrorCode, plus DTI_OK. */
typedef enum dti_status {
  DTI_OK = 0,
  DTI_INVALID_ARGUMENT = 1,   /* a caller-supplied value is out of range or malformed */
  DTI_NOT_FOUND = 2,          /* a file, tensor or token does not exist */
  DTI_CORRUPT = 3,            /* stored data fails validation */
  DTI_UNSUPPORTED = 4,        /* valid but unsupported architecture, dtype, component */
  DTI_RESOURCE_EXHAUSTED = 5, /* queue, budget or memory limit */
  DTI_UNAVAILABLE = 6,        /* the session is closed */
  DTI_INTERNAL = 7            /* a bug in detinfer */
} dti_status;

/* Stable lowercase name of a status ("ok", "invalid_argument", ...). */
DETINFER_API const char* dti_status_name(dti_status status);
/* The message of the last failed call on this thread ("" if none). */
DETINFER_API const char* dti_last_error(void);
/* "0.1.0" */
DETINFER_API const char* dti_version(void);

typedef struct dti_session dti_session;
typedef struct dti_result dti_result;

typedef enum dti_numerics_mode {
  DTI_MODE_CANONICAL = 0, /* numerics spec v1: bitwise reproducible (default) */
  DTI_MODE_FAST = 1       /* libtorch kernels, no reproducibility guarantee */
} dti_numerics_mode;

/* The members mirror SessionOptions fields; docs/cli.md ("Session options") lists every
 * field with its C member, range and meaning (one table drives both conversions). */
typedef struct dti_session_options {
  uint32_t struct_size;         /* sizeof(dti_session_options), set by _default() */
  int32_t mode;                 /* dti_numerics_mode; DTI_MODE_CANONICAL */
  int32_t threads;              /* kernel threads 1..1024; 0 = all cores */
  int64_t kv_budget_bytes;      /* KV pool bytes; 0 = auto */
  int32_t kv_block_size;        /* tokens per KV block 1..1024; 16 */
  int32_t max_batch;            /* sequences per decode step 1..4096; 32 */
  int32_t prefill_chunk_tokens; /* prompt tokens per step; 256 */
  int32_t max_queue;            /* waiting requests; 256 */
  int32_t log_level;            /* -1 = keep; 0 trace .. 5 critical, 6 off */
  int32_t fingerprint_level;    /* run fingerprint JSON in every result: 0 off, 1 final
                                   (tokens + chain digests), 2 steps (+ per-step digests;
                                   the default, as in C++); docs/fingerprint.md */
  /* --- v2: caches (docs/cache.md) --- */
  int32_t prefix_cache;              /* KV-prefix cache: 1 on (default), 0 off */
  int64_t prefix_cache_memory_bytes; /* its memory tier: 0 = 20% of RAM; -1 = no memory tier */
  const char* disk_cache_dir;        /* its disk tier's folder; NULL = no disk tier */
  int64_t disk_cache_bytes;          /* disk tier budget; 10 GiB */
  int32_t prefix_cache_redis;        /* 1: Redis tier too (needs redis_host); 0 */
  int32_t result_cache;              /* result cache: 0 off (default), 1 on */
  int64_t result_cache_memory_bytes; /* 256 MiB */
  int32_t result_cache_redis;        /* 1: the result cache also stores in Redis; 0 */
  const char* redis_host;            /* NULL = no Redis (a Redis tier then fails) */
  int32_t redis_port;                /* 6379 */
  const char* cache_salt;            /* mixed into prefix-cache keys; NULL = "" */
  /* --- v3: numerics --- */
  int32_t kv_dtype; /* dti_kv_dtype: KV cache storage precision; DTI_KV_F32 (docs/numerics.md) */
  /* --- v4: speculative decoding (docs/speculative.md) --- */
  const char* draft_model; /* draft model folder (same tokenizer); NULL = none */
  /* --- v5: quantized weights (docs/numerics.md, "Quantized linear") --- */
  const char* weights; /* "native" (NULL), a format ("q8_0", "q4_k", ...) or a mix
                          ("q4_k_m", ...): quantize on load (SessionOptions::weights) */
} dti_session_options;

typedef enum dti_kv_dtype { DTI_KV_F32 = 0, DTI_KV_BF16 = 1, DTI_KV_F16 = 2 } dti_kv_dtype;

/* struct_size of the first version (0.1: up to fingerprint_level). */
#define DTI_SESSION_OPTIONS_SIZE_V1 ((uint32_t)offsetof(dti_session_options, prefix_cache))
/* struct_size of the second version (caches, up to cache_salt). */
#define DTI_SESSION_OPTIONS_SIZE_V2 ((uint32_t)offsetof(dti_session_options, kv_dtype))
/* struct_size of the third version (kv_dtype). */
#define DTI_SESSION_OPTIONS_SIZE_V3 ((uint32_t)offsetof(dti_session_options, draft_model))
/* struct_size of the fourth version (draft_model). */
#define DTI_SESSION_OPTIONS_SIZE_V4 ((uint32_t)offsetof(dti_session_options, weights))

DETINFER_API dti_session_options dti_session_options_default(void);

/* Loads config.json + safetensors (+ tokenizer.json) from model_dir. options may be NULL
 * (defaults). On success *out is a new session; on failure *out is NULL. */
DETINFER_API dti_status dti_session_open(const char* model_dir, const dti_session_options* options,
                                         dti_session** out);
/* Stops the session (running requests fail with DTI_UNAVAILABLE) and frees it. NULL is
 * a no-op. No other call may use the session concurrently with or after this one. */
DETINFER_API void dti_session_close(dti_session* session);

/* Model facts. The string outputs are NUL-terminated copies for dti_string_free. */
DETINFER_API dti_status dti_session_model_fingerprint(const dti_session* session, char** out);
DETINFER_API dti_status dti_session_vocab_size(const dti_session* session, int64_t* out);
/* Prometheus text exposition (format 0.0.4) of the session's metrics (detinfer_*
 * families, docs/metrics.md): requests, tokens, latencies, batch sizes, queue, KV. */
DETINFER_API dti_status dti_session_metrics_text(const dti_session* session, char** out);
DETINFER_API void dti_string_free(char* s);

typedef struct dti_generation_config {
  uint32_t struct_size;         /* sizeof(dti_generation_config), set by _default() */
  int32_t max_new_tokens;       /* 64 */
  float temperature;            /* 0 = greedy */
  int32_t top_k;                /* 0 = off */
  float top_p;                  /* 1 = off */
  float min_p;                  /* 0 = off */
  float repetition_penalty;     /* 1 = off */
  float presence_penalty;       /* 0 */
  float frequency_penalty;      /* 0 */
  int32_t has_seed;             /* 0: the session draws a seed and reports it */
  uint64_t seed;                /* used when has_seed != 0 */
  int32_t num_return_sequences; /* 1 */
  uint32_t first_sample_index;  /* 0 */
  int32_t num_beams;            /* 1 = no beam search */
  float length_penalty;         /* 1 */
  int32_t early_stopping;       /* 0 */
  /* Stop tokens: when stop_token_ids is NULL the model's eos ids are used; otherwise
   * exactly these num_stop_token_ids ids (0 = none). */
  const int32_t* stop_token_ids;
  size_t num_stop_token_ids;
  const char* const* stop_strings; /* num_stop_strings NUL-terminated strings */
  size_t num_stop_strings;
  int32_t logprobs;   /* top-N logprobs per step 0..20 (dti_result_logprob) */
  int32_t ignore_eos; /* 0 */
  /* Structured output (docs/structured.md): a dti_response_format; json_schema is the
   * JSON Schema text (NUL-terminated) with DTI_RESPONSE_JSON_SCHEMA, NULL otherwise. */
  int32_t response_format;
  const char* json_schema;
  /* Speculative decoding (docs/speculative.md; outputs unchanged): tokens the n-gram
   * drafter proposes per step (0 = off, 1..8) and the n-gram lengths it matches
   * (with draft_with_model: the draft model proposes them). */
  int32_t draft_tokens;    /* 0 */
  int32_t draft_ngram_min; /* 1 */
  int32_t draft_ngram_max; /* 3 */
  /* --- v4: 1 = draft with the session's draft model (dti_session_options.draft_model)
   * instead of n-grams; 0 (default) --- */
  int32_t draft_with_model;
} dti_generation_config;

typedef enum dti_response_format {
  DTI_RESPONSE_TEXT = 0,
  DTI_RESPONSE_JSON_OBJECT = 1,
  DTI_RESPONSE_JSON_SCHEMA = 2
} dti_response_format;

/* struct_size of the first version (0.1: up to ignore_eos). */
#define DTI_GENERATION_CONFIG_SIZE_V1 \
  ((uint32_t)(offsetof(dti_generation_config, ignore_eos) + sizeof(int32_t)))
/* struct_size of the second version (response_format, json_schema). */
#define DTI_GENERATION_CONFIG_SIZE_V2 \
  ((uint32_t)(offsetof(dti_generation_config, json_schema) + sizeof(const char*)))
/* struct_size of the third version (draft_tokens, draft_ngram_min, draft_ngram_max). */
#define DTI_GENERATION_CONFIG_SIZE_V3 \
  ((uint32_t)(offsetof(dti_generation_config, draft_ngram_max) + sizeof(int32_t)))
/* struct_size of the fourth version (draft_with_model). */
#define DTI_GENERATION_CONFIG_SIZE_V4 ((uint32_t)sizeof(dti_generation_config))

DETINFER_API dti_generation_config dti_generation_config_default(void);

/* Streaming: called on the session's engine thread for every generated token, with the
 * text that became final with it (text_len bytes, NUL-terminated, possibly empty). Return
 * nonzero to continue, 0 to cancel the request (it finishes with DTI_FINISH_CANCELLED). */
typedef int (*dti_token_callback)(void* user_data, int32_t token, const char* text, size_t text_len,
                                  int32_t sample_index, int32_t step);

/* Blocking generation from a text prompt (encoded with the model's tokenizer) or from
 * token ids. config may be NULL (defaults); on_token may be NULL. On success *out is a
 * new result; on failure *out is NULL. */
DETINFER_API dti_status dti_generate_text(dti_session* session, const char* prompt,
                                          const dti_generation_config* config,
                                          dti_token_callback on_token, void* user_data,
                                          dti_result** out);
DETINFER_API dti_status dti_generate_tokens(dti_session* session, const int32_t* prompt_tokens,
                                            size_t num_prompt_tokens,
                                            const dti_generation_config* config,
                                            dti_token_callback on_token, void* user_data,
                                            dti_result** out);

typedef enum dti_finish_reason {
  DTI_FINISH_LENGTH = 0,
  DTI_FINISH_STOP = 1,
  DTI_FINISH_CANCELLED = 2
} dti_finish_reason;

/* Result accessors. An index out of range gives NULL / 0 / -1 as stated. */
DETINFER_API size_t dti_result_num_sequences(const dti_result* result);
/* NUL-terminated text of sequence i; *len (optional) gets its length. NULL if out of range. */
DETINFER_API const char* dti_result_text(const dti_result* result, size_t i, size_t* len);
/* Generated token ids of sequence i; *count gets their number. NULL if out of range. */
DETINFER_API const int32_t* dti_result_tokens(const dti_result* result, size_t i, size_t* count);
/* dti_finish_reason of sequence i, or -1 if out of range. */
DETINFER_API int32_t dti_result_finish_reason(const dti_result* result, size_t i);
/* Chain digest over the per-step logits digests of sequence i (0 if out of range). */
DETINFER_API uint64_t dti_result_digest(const dti_result* result, size_t i);
DETINFER_API const int32_t* dti_result_prompt_tokens(const dti_result* result, size_t* count);
/* The seed actually used. */
DETINFER_API uint64_t dti_result_seed(const dti_result* result);
/* The run fingerprint as one JSON line, "" when the session's fingerprint_level is 0. */
DETINFER_API const char* dti_result_fingerprint_json(const dti_result* result);
/* The result's transcript (docs/fingerprint.md, "detinfer.transcript/1") as one JSON
 * line: what dti_verify checks. Valid until dti_result_free. */
DETINFER_API const char* dti_result_transcript_json(const dti_result* result);
/* Logprobs of sequence i (when the config asked for logprobs > 0): the number of steps
 * that carry them (0 otherwise or out of range). */
DETINFER_API size_t dti_result_num_logprob_steps(const dti_result* result, size_t i);
/* Step `step` of sequence i: rank 0 is the chosen token, rank r >= 1 the r-th entry of the
 * top-N list (sorted by logprob desc, then token id). *token and *logprob get the entry.
 * DTI_INVALID_ARGUMENT when i, step or rank is out of range (*num_top, when given, still
 * gets the step's top-N size if step is valid). */
DETINFER_API dti_status dti_result_logprob(const dti_result* result, size_t i, size_t step,
                                           size_t rank, int32_t* token, float* logprob,
                                           size_t* num_top);
DETINFER_API void dti_result_free(dti_result* result);

/* --- asynchronous requests ------------------------------------------------------------ */
typedef struct dti_request dti_request;

/* Queues a request and returns at once; on_token (may be NULL) is called on the engine
 * thread and user_data must stay valid until the request is freed. Invalid input fails
 * here (*out NULL); failures while running come from dti_request_wait. */
DETINFER_API dti_status dti_submit_text(dti_session* session, const char* prompt,
                                        const dti_generation_config* config,
                                        dti_token_callback on_token, void* user_data,
                                        dti_request** out);
DETINFER_API dti_status dti_submit_tokens(dti_session* session, const int32_t* prompt_tokens,
                                          size_t num_prompt_tokens,
                                          const dti_generation_config* config,
                                          dti_token_callback on_token, void* user_data,
                                          dti_request** out);
/* Thread-safe, any number of times: the request stops at its next step and finishes with
 * DTI_FINISH_CANCELLED and what it generated so far. */
DETINFER_API dti_status dti_request_cancel(dti_request* request);
/* 1 when the request has finished (dti_request_wait will not block), else 0. */
DETINFER_API int32_t dti_request_done(const dti_request* request);
/* Blocks until the request finishes; on success *out is a new result. Once per request:
 * a second call is DTI_INVALID_ARGUMENT. */
DETINFER_API dti_status dti_request_wait(dti_request* request, dti_result** out);
/* Cancels the request if it still runs, waits for it and frees it. NULL is a no-op. */
DETINFER_API void dti_request_free(dti_request* request);

/* --- tokenizer ------------------------------------------------------------------------ */
/* Token ids of text[0..text_len) with the model's tokenizer (special tokens added as the
 * tokenizer's post-processor says). *tokens is freed with dti_tokens_free. A model folder
 * without tokenizer.json is DTI_UNSUPPORTED. */
DETINFER_API dti_status dti_tokenize(const dti_session* session, const char* text, size_t text_len,
                                     int32_t** tokens, size_t* count);
/* Text of token ids (NUL-terminated, *len bytes; dti_string_free). Ids out of the
 * vocabulary are DTI_INVALID_ARGUMENT. skip_special != 0 drops special tokens. */
DETINFER_API dti_status dti_detokenize(const dti_session* session, const int32_t* tokens,
                                       size_t count, int32_t skip_special, char** text,
                                       size_t* len);
DETINFER_API void dti_tokens_free(int32_t* tokens);

/* --- replay (docs/session.md, "Replay") ---------------------------------------------- */
typedef enum dti_replay_verdict {
  DTI_REPLAY_REPRODUCED = 0, /* same tokens, finish reasons and every recorded digest */
  DTI_REPLAY_DIVERGED = 1,   /* ran, but the output or the numerics mode differs */
  DTI_REPLAY_REFUSED = 2     /* not run: model/tokenizer differ, no prompt ids, ... */
} dti_replay_verdict;
/* Re-runs the request one fingerprint JSON line records (dti_result_fingerprint_json) on
 * this session and compares every digest. *verdict gets a dti_replay_verdict; *report
 * (optional, may be NULL) the report as text for dti_string_free. A malformed
 * fingerprint is DTI_INVALID_ARGUMENT or DTI_CORRUPT. */
DETINFER_API dti_status dti_replay(dti_session* session, const char* fingerprint_json,
                                   int32_t* verdict, char** report);

/* --- verification (docs/fingerprint.md, "Transcripts and verification") ------------ */
/* Verifies one transcript JSON (dti_result_transcript_json) on this session without
 * regenerating it. *verified gets 1 (every step's token and digest recomputed) or 0
 * (diverged); *report (optional, may be NULL) one line naming the first divergent
 * sample and step, for dti_string_free. A malformed transcript, or one made with another
 * model, weight format or numerics, is DTI_INVALID_ARGUMENT (never verified). */
DETINFER_API dti_status dti_verify(dti_session* session, const char* transcript_json,
                                   int32_t* verified, char** report);

/* --- logging -------------------------------------------------------------------------- */
/* Receives each log record that passes the level (0 trace .. 5 critical) with its text
 * (len bytes, NUL-terminated, valid during the call), on whichever thread logs. */
typedef void (*dti_log_callback)(void* user_data, int32_t level, const char* message, size_t len);
/* Sends every later record to callback instead of stderr; NULL restores stderr.
 * Process-wide, as llama.cpp's llama_log_set. */
DETINFER_API void dti_log_set(dti_log_callback callback, void* user_data);
/* 0 trace .. 5 critical, 6 off; DTI_INVALID_ARGUMENT otherwise. */
DETINFER_API dti_status dti_log_set_level(int32_t level);

/* --- chat (docs/chat.md) ----------------------------------------------------------- */
/* Messages are OpenAI-shaped JSON text: a list of {"role", "content" (string, null or
 * [{"type": "text", "text"}]), "name", "tool_calls", "tool_call_id", "reasoning_content"}. */
typedef struct dti_chat_options {
  uint32_t struct_size;             /* sizeof(dti_chat_options), set by _default() */
  int32_t add_generation_prompt;    /* 1: end with the assistant turn's opening */
  const char* tools_json;           /* NULL = no tools; else a JSON list of tool definitions */
  const char* extra_variables_json; /* NULL = none; else a JSON object, e.g.
                                     * {"enable_thinking": false} */
  const char* template_name;        /* NULL = the model's choice ("tool_use" / "default") */
  int32_t has_now;                  /* 0: strftime_now() formats the clock */
  int64_t now_unix_seconds;         /* used when has_now != 0 */
} dti_chat_options;

DETINFER_API dti_chat_options dti_chat_options_default(void);
/* The prompt text the model's chat template makes of messages_json (transformers'
 * apply_chat_template), for dti_string_free. options may be NULL (defaults). No template:
 * DTI_UNSUPPORTED; malformed messages/options, template errors and the template's
 * raise_exception(): DTI_INVALID_ARGUMENT with the message (dti_last_error). */
DETINFER_API dti_status dti_apply_chat_template(const dti_session* session,
                                                const char* messages_json,
                                                const dti_chat_options* options, char** out);
/* Generates from the rendered conversation. config NULL = the model's defaults
 * (dti_session_default_generation_config), not dti_generation_config_default(). */
DETINFER_API dti_status dti_chat(dti_session* session, const char* messages_json,
                                 const dti_chat_options* options,
                                 const dti_generation_config* config, dti_token_callback on_token,
                                 void* user_data, dti_result** out);
/* dti_generation_config_default() with the model's generation_config.json applied
 * (temperature, top_k, top_p, min_p, repetition_penalty, max_new_tokens). */
DETINFER_API dti_status dti_session_default_generation_config(const dti_session* session,
                                                              dti_generation_config* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DETINFER_C_API_H_ */
