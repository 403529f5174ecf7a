/* The C API's later additions from C11: callers built against the first struct layouts
 * (old struct_size), the default fingerprint level, asynchronous submit / wait / cancel
 * (synchronized explicitly, no sleeps), tokenize / detokenize, logprobs, replay, cache
 * options and the log callback.
 * Usage: capi_features_test <tiny model dir>. Also runs under ASan (capi_features_test_asan). */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_check.h"
#include "detinfer/c_api.h"

static const char* model_dir;

/* dti_session_options exactly as c_api.h 0.1 declared it: what an old caller passes. */
typedef struct {
  uint32_t struct_size;
  int32_t mode;
  int32_t threads;
  int64_t kv_budget_bytes;
  int32_t kv_block_size;
  int32_t max_batch;
  int32_t prefill_chunk_tokens;
  int32_t max_queue;
  int32_t log_level;
  int32_t fingerprint_level;
} options_v1;

static dti_result* greedy(dti_session* s, const char* prompt, int32_t max_new_tokens) {
  dti_generation_config c = dti_generation_config_default();
  c.max_new_tokens = max_new_tokens;
  c.ignore_eos = 1;
  dti_result* r = NULL;
  CHECK_OK(dti_generate_text(s, prompt, &c, NULL, NULL, &r));
  return r;
}

/* --- struct_size of every released version; one default fingerprint level ------------- */
static void test_versions(void) {
  CHECK(DTI_SESSION_OPTIONS_SIZE_V1 == sizeof(options_v1));
  CHECK(DTI_SESSION_OPTIONS_SIZE_V1 < sizeof(dti_session_options));
  dti_session_options d = dti_session_options_default();
  CHECK(d.fingerprint_level == 2); /* steps, as SessionOptions in C++ */
  CHECK(d.prefix_cache == 1 && d.result_cache == 0 && d.redis_port == 6379);

  options_v1 old;
  memset(&old, 0, sizeof old);
  old.struct_size = (uint32_t)sizeof old;
  old.mode = DTI_MODE_CANONICAL;
  old.threads = 1;
  old.kv_block_size = 16;
  old.max_batch = 8;
  old.prefill_chunk_tokens = 64;
  old.max_queue = 16;
  old.log_level = -1;
  old.fingerprint_level = 0;
  dti_session* s = NULL;
  CHECK_OK(dti_session_open(model_dir, (const dti_session_options*)&old, &s));
  if (s != NULL) {
    dti_result* r = greedy(s, "old caller", 4);
    CHECK(r != NULL && strcmp(dti_result_fingerprint_json(r), "") == 0); /* level 0 kept */
    dti_result_free(r);
    dti_session_close(s);
  }
  /* The new struct at its full size, default fingerprint level: a fingerprint. */
  CHECK_OK(dti_session_open(model_dir, NULL, &s));
  if (s != NULL) {
    dti_result* r = greedy(s, "new caller", 4);
    CHECK(r != NULL && strstr(dti_result_fingerprint_json(r), "step_digests") != NULL);
    dti_result_free(r);
    dti_session_close(s);
  }
  /* A size between versions, or larger than this library knows, is refused. */
  old.struct_size = DTI_SESSION_OPTIONS_SIZE_V1 + 4;
  CHECK(dti_session_open(model_dir, (const dti_session_options*)&old, &s) == DTI_INVALID_ARGUMENT);
  CHECK(strstr(dti_last_error(), "struct_size") != NULL);
  dti_generation_config c = dti_generation_config_default();
  CHECK(c.struct_size == DTI_GENERATION_CONFIG_SIZE_V4);
  CHECK(DTI_GENERATION_CONFIG_SIZE_V1 < DTI_GENERATION_CONFIG_SIZE_V2);
  CHECK(DTI_GENERATION_CONFIG_SIZE_V2 < DTI_GENERATION_CONFIG_SIZE_V3);
  CHECK(DTI_GENERATION_CONFIG_SIZE_V3 < DTI_GENERATION_CONFIG_SIZE_V4);
  CHECK(c.draft_tokens == 0 && c.draft_ngram_min == 1 && c.draft_ngram_max == 3);
  CHECK(c.draft_with_model == 0);
  CHECK(c.response_format == DTI_RESPONSE_TEXT && c.json_schema == NULL);

  /* v3: kv_dtype (f32 by default; a v2-sized struct keeps it; bad values are refused). */
  CHECK(DTI_SESSION_OPTIONS_SIZE_V2 < DTI_SESSION_OPTIONS_SIZE_V3);
  CHECK(DTI_SESSION_OPTIONS_SIZE_V3 < DTI_SESSION_OPTIONS_SIZE_V4);
  CHECK(DTI_SESSION_OPTIONS_SIZE_V4 < sizeof(dti_session_options));
  CHECK(d.draft_model == NULL);
  CHECK(d.weights == NULL);
  CHECK(d.kv_dtype == DTI_KV_F32);
  dti_session_options v2 = dti_session_options_default();
  v2.struct_size = DTI_SESSION_OPTIONS_SIZE_V2;
  v2.threads = 1;
  CHECK_OK(dti_session_open(model_dir, &v2, &s));
  dti_session_close(s);
  dti_session_options bf = dti_session_options_default();
  bf.threads = 1;
  bf.kv_dtype = DTI_KV_BF16;
  CHECK_OK(dti_session_open(model_dir, &bf, &s));
  if (s != NULL) {
    dti_result* r = greedy(s, "half kv", 4);
    CHECK(r != NULL && strstr(dti_result_fingerprint_json(r), "\"kv_dtype\":\"bf16\"") != NULL);
    dti_result_free(r);
    dti_session_close(s);
  }
  bf.kv_dtype = 7;
  CHECK(dti_session_open(model_dir, &bf, &s) == DTI_INVALID_ARGUMENT);
  CHECK(strstr(dti_last_error(), "kv_dtype") != NULL);
}

/* --- async cancel: the callback holds the engine until the cancel has been issued ------ */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int first_token_seen; /* set by the engine thread at step 0 */
  int cancel_issued;    /* set by the test thread after dti_request_cancel */
  int32_t steps_seen;
} cancel_sync;

static int blocking_callback(void* user, int32_t token, const char* text, size_t len,
                             int32_t sample, int32_t step) {
  cancel_sync* c = (cancel_sync*)user;
  (void)token, (void)text, (void)len, (void)sample;
  pthread_mutex_lock(&c->mu);
  c->steps_seen = step + 1;
  c->first_token_seen = 1;
  pthread_cond_broadcast(&c->cv);
  while (!c->cancel_issued) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
  return 1; /* continue: only dti_request_cancel stops the request */
}

static void test_async(dti_session* s) {
  cancel_sync sync;
  memset(&sync, 0, sizeof sync);
  pthread_mutex_init(&sync.mu, NULL);
  pthread_cond_init(&sync.cv, NULL);
  dti_generation_config c = dti_generation_config_default();
  c.max_new_tokens = 200;
  c.ignore_eos = 1;
  dti_request* req = NULL;
  CHECK_OK(dti_submit_text(s, "cancel me", &c, blocking_callback, &sync, &req));
  if (req == NULL) return;
  pthread_mutex_lock(&sync.mu);
  while (!sync.first_token_seen) pthread_cond_wait(&sync.cv, &sync.mu);
  CHECK(dti_request_done(req) == 0); /* the engine is inside our callback */
  CHECK_OK(dti_request_cancel(req));
  CHECK_OK(dti_request_cancel(req)); /* idempotent */
  sync.cancel_issued = 1;
  pthread_cond_broadcast(&sync.cv);
  pthread_mutex_unlock(&sync.mu);

  dti_result* r = NULL;
  CHECK_OK(dti_request_wait(req, &r));
  CHECK(dti_request_done(req) == 1);
  size_t n = 0;
  dti_result_tokens(r, 0, &n);
  CHECK(r != NULL && dti_result_finish_reason(r, 0) == DTI_FINISH_CANCELLED);
  CHECK(n >= 1 && n < 200 && (int32_t)n == sync.steps_seen);
  dti_result* again = NULL;
  CHECK(dti_request_wait(req, &again) == DTI_INVALID_ARGUMENT && again == NULL);
  dti_result_free(r);
  dti_request_free(req);

  /* An uncancelled async request equals the blocking one, bit for bit. */
  c.max_new_tokens = 6;
  CHECK_OK(dti_submit_text(s, "async", &c, NULL, NULL, &req));
  dti_result* a = NULL;
  if (req != NULL) CHECK_OK(dti_request_wait(req, &a));
  dti_request_free(req);
  dti_result* b = greedy(s, "async", 6);
  size_t na = 0, nb = 0;
  const int32_t* ta = dti_result_tokens(a, 0, &na);
  const int32_t* tb = dti_result_tokens(b, 0, &nb);
  CHECK(ta && tb && na == 6 && na == nb && memcmp(ta, tb, na * sizeof *ta) == 0);
  CHECK(dti_result_digest(a, 0) == dti_result_digest(b, 0));
  dti_result_free(a);
  dti_result_free(b);
  /* Invalid input fails at submit; freeing a never-waited request is safe. */
  c.temperature = -1.0f;
  CHECK(dti_submit_text(s, "x", &c, NULL, NULL, &req) == DTI_INVALID_ARGUMENT && req == NULL);
  dti_request_free(NULL);
  pthread_cond_destroy(&sync.cv);
  pthread_mutex_destroy(&sync.mu);
}

/* --- tokenizer, logprobs, replay ------------------------------------------------------ */
static void test_tokenizer_logprobs_replay(dti_session* s) {
  const char* text = "Hello, tokenizer!";
  int32_t* ids = NULL;
  size_t n = 0;
  CHECK_OK(dti_tokenize(s, text, strlen(text), &ids, &n));
  CHECK(ids != NULL && n > 0);
  char* back = NULL;
  size_t len = 0;
  CHECK_OK(dti_detokenize(s, ids, n, 0, &back, &len));
  CHECK(back != NULL && len == strlen(text) && strcmp(back, text) == 0);
  dti_string_free(back);
  dti_tokens_free(ids);
  const int32_t bad_id = 1 << 30;
  CHECK(dti_detokenize(s, &bad_id, 1, 0, &back, &len) == DTI_INVALID_ARGUMENT && back == NULL);

  dti_generation_config c = dti_generation_config_default();
  c.max_new_tokens = 5;
  c.ignore_eos = 1;
  c.logprobs = 3;
  dti_result* r = NULL;
  CHECK_OK(dti_generate_text(s, text, &c, NULL, NULL, &r));
  size_t nt = 0;
  const int32_t* toks = dti_result_tokens(r, 0, &nt);
  CHECK(dti_result_num_logprob_steps(r, 0) == nt && nt == 5);
  for (size_t step = 0; toks != NULL && step < nt; ++step) {
    int32_t tok = -1, top_tok = -1;
    float lp = 1.0f, top_lp = 1.0f;
    size_t num_top = 0;
    CHECK_OK(dti_result_logprob(r, 0, step, 0, &tok, &lp, &num_top));
    CHECK(tok == toks[step] && lp <= 0.0f && num_top == 3);
    CHECK_OK(dti_result_logprob(r, 0, step, 1, &top_tok, &top_lp, NULL));
    CHECK(top_tok == tok && top_lp == lp); /* greedy: the chosen token is the top one */
  }
  int32_t tok = 0;
  float lp = 0.0f;
  CHECK(dti_result_logprob(r, 0, nt, 0, &tok, &lp, NULL) == DTI_INVALID_ARGUMENT);
  CHECK(dti_result_logprob(r, 0, 0, 4, &tok, &lp, NULL) == DTI_INVALID_ARGUMENT);
  CHECK(dti_result_num_logprob_steps(r, 1) == 0);

  /* Replaying the run's own fingerprint reproduces it. */
  int32_t verdict = -1;
  char* report = NULL;
  CHECK_OK(dti_replay(s, dti_result_fingerprint_json(r), &verdict, &report));
  CHECK(verdict == DTI_REPLAY_REPRODUCED);
  CHECK(report != NULL && strstr(report, "reproduced") != NULL);
  dti_string_free(report);
  CHECK(dti_replay(s, "{not json", &verdict, NULL) != DTI_OK);

  /* Its transcript verifies without regeneration; a changed chain digest diverges; a
   * malformed one is an error and never verified. */
  const char* transcript = dti_result_transcript_json(r);
  CHECK(strstr(transcript, "detinfer.transcript/1") != NULL);
  int32_t verified = -1;
  CHECK_OK(dti_verify(s, transcript, &verified, &report));
  CHECK(verified == 1);
  CHECK(report != NULL && strstr(report, "verified") != NULL);
  dti_string_free(report);
  char* tampered = (char*)malloc(strlen(transcript) + 1);
  CHECK(tampered != NULL);
  if (tampered != NULL) {
    strcpy(tampered, transcript);
    char* chain = strstr(tampered, "\"chain_digest\":\"");
    CHECK(chain != NULL);
    if (chain != NULL) {
      char* digit = chain + strlen("\"chain_digest\":\"");
      *digit = *digit == '0' ? '1' : '0';
      CHECK_OK(dti_verify(s, tampered, &verified, NULL));
      CHECK(verified == 0);
    }
    free(tampered);
  }
  CHECK(dti_verify(s, "{not json", &verified, NULL) == DTI_INVALID_ARGUMENT);
  CHECK(verified == 0);
  dti_result_free(r);
}

/* --- cache options -------------------------------------------------------------------- */
static void test_result_cache(void) {
  dti_session_options o = dti_session_options_default();
  o.result_cache = 1;
  o.cache_salt = "capi";
  dti_session* s = NULL;
  CHECK_OK(dti_session_open(model_dir, &o, &s));
  if (s == NULL) return;
  dti_generation_config c = dti_generation_config_default();
  c.max_new_tokens = 4;
  c.has_seed = 1;
  c.seed = 9;
  dti_result* a = NULL;
  dti_result* b = NULL;
  CHECK_OK(dti_generate_text(s, "cache me", &c, NULL, NULL, &a));
  CHECK_OK(dti_generate_text(s, "cache me", &c, NULL, NULL, &b));
  CHECK(a && b && dti_result_digest(a, 0) == dti_result_digest(b, 0));
  char* metrics = NULL;
  CHECK_OK(dti_session_metrics_text(s, &metrics));
  CHECK(metrics != NULL && strstr(metrics, "detinfer_cache_hits_total{cache=\"result\"} 1"));
  dti_string_free(metrics);
  dti_result_free(a);
  dti_result_free(b);
  dti_session_close(s);

  o = dti_session_options_default();
  o.prefix_cache_memory_bytes = -2;
  CHECK(dti_session_open(model_dir, &o, &s) == DTI_INVALID_ARGUMENT);
  CHECK(strstr(dti_last_error(), "prefix_cache_memory_bytes") != NULL);
}

/* --- log callback --------------------------------------------------------------------- */
typedef struct {
  int records;
  int saw_session_opened;
} log_state;

static void on_log(void* user, int32_t level, const char* message, size_t len) {
  log_state* st = (log_state*)user;
  ++st->records;
  if (level == 2 && strlen(message) == len && strstr(message, "session opened") != NULL) {
    st->saw_session_opened = 1;
  }
}

static void test_log_callback(void) {
  log_state st;
  memset(&st, 0, sizeof st);
  dti_log_set(on_log, &st);
  dti_session_options o = dti_session_options_default();
  o.log_level = 2; /* info */
  dti_session* s = NULL;
  CHECK_OK(dti_session_open(model_dir, &o, &s));
  dti_session_close(s);
  CHECK(st.saw_session_opened == 1);
  dti_log_set(NULL, NULL); /* back to stderr: our state sees nothing more */
  const int before = st.records;
  CHECK_OK(dti_session_open(model_dir, &o, &s));
  dti_session_close(s);
  CHECK(st.records == before);
  CHECK_OK(dti_log_set_level(3));
  CHECK(dti_log_set_level(7) == DTI_INVALID_ARGUMENT);
}

/* response_format (v2 of dti_generation_config): a schema is followed and the structure
 * ends the generation; an unsupported keyword is refused naming it; a v1-sized struct
 * generates text. */
static void test_structured(dti_session* s) {
  dti_generation_config c = dti_generation_config_default();
  c.max_new_tokens = 100;
  c.response_format = DTI_RESPONSE_JSON_SCHEMA;
  c.json_schema =
      "{\"type\": \"object\", \"properties\": {\"ok\": {\"type\": \"boolean\"}},"
      " \"required\": [\"ok\"], \"additionalProperties\": false}";
  dti_result* r = NULL;
  CHECK_OK(dti_generate_text(s, "answer: ", &c, NULL, NULL, &r));
  if (r != NULL) {
    size_t len = 0;
    const char* text = dti_result_text(r, 0, &len);
    CHECK(dti_result_finish_reason(r, 0) == DTI_FINISH_STOP);
    CHECK(strcmp(text, "{\"ok\":true}") == 0 || strcmp(text, "{\"ok\":false}") == 0 ||
          strcmp(text, "{\"ok\": true}") == 0 || strcmp(text, "{\"ok\": false}") == 0);
    dti_result_free(r);
  }
  c.json_schema = "{\"type\": \"string\", \"pattern\": \"(?=a)\"}";
  r = NULL;
  CHECK(dti_generate_text(s, "x", &c, NULL, NULL, &r) == DTI_INVALID_ARGUMENT);
  CHECK(r == NULL && strstr(dti_last_error(), "'pattern'") != NULL);
  c.json_schema = NULL;
  CHECK(dti_generate_text(s, "x", &c, NULL, NULL, &r) == DTI_INVALID_ARGUMENT);
  c.response_format = 7;
  CHECK(dti_generate_text(s, "x", &c, NULL, NULL, &r) == DTI_INVALID_ARGUMENT);
  c.struct_size = DTI_GENERATION_CONFIG_SIZE_V1; /* an old caller: text */
  c.max_new_tokens = 2;
  CHECK_OK(dti_generate_text(s, "x", &c, NULL, NULL, &r));
  dti_result_free(r);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <tiny model dir>\n", argv[0]);
    return 2;
  }
  model_dir = argv[1];
  test_versions();
  dti_session_options o = dti_session_options_default();
  o.threads = 2;
  dti_session* s = NULL;
  CHECK_OK(dti_session_open(model_dir, &o, &s));
  if (s != NULL) {
    test_async(s);
    test_tokenizer_logprobs_replay(s);
    test_structured(s);
    dti_session_close(s);
  }
  test_result_cache();
  test_log_callback();
  if (failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("capi_features_test: all checks passed\n");
  return 0;
}
