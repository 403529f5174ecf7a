/* The C API end to end from C11: open, generate (text and tokens), streaming, seeds,
 * concurrency, fingerprint JSON, metrics text, and the error paths (bad model path,
 * invalid options) that must come back as status codes with messages.
 * Usage: capi_test <tiny model dir>. Runs under AddressSanitizer (capi_test_asan). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_check.h"
#include "detinfer/c_api.h"

static const char* model_dir;

/* --- error paths ------------------------------------------------------------------- */
static void test_errors(void) {
  dti_session* s = (dti_session*)0x1; /* must be reset to NULL on failure */
  dti_status st = dti_session_open("/nonexistent/detinfer-model", NULL, &s);
  CHECK(st == DTI_NOT_FOUND);
  CHECK(s == NULL);
  CHECK(strstr(dti_last_error(), "/nonexistent/detinfer-model") != NULL);
  CHECK(strcmp(dti_status_name(st), "not_found") == 0);

  dti_session_options o = dti_session_options_default();
  o.max_batch = 0;
  st = dti_session_open(model_dir, &o, &s);
  CHECK(st == DTI_INVALID_ARGUMENT);
  CHECK(s == NULL);
  CHECK(strstr(dti_last_error(), "max_batch") != NULL);

  o = dti_session_options_default();
  o.mode = 7;
  CHECK(dti_session_open(model_dir, &o, &s) == DTI_INVALID_ARGUMENT);
  CHECK(strstr(dti_last_error(), "mode") != NULL);

  o = dti_session_options_default();
  o.fingerprint_level = 9;
  CHECK(dti_session_open(model_dir, &o, &s) == DTI_INVALID_ARGUMENT);
  CHECK(strstr(dti_last_error(), "fingerprint_level") != NULL);

  o = dti_session_options_default();
  o.struct_size = 3; /* not initialized with _default() */
  CHECK(dti_session_open(model_dir, &o, &s) == DTI_INVALID_ARGUMENT);
  CHECK(strstr(dti_last_error(), "struct_size") != NULL);

  CHECK(dti_session_open(NULL, NULL, &s) == DTI_INVALID_ARGUMENT);
  CHECK(dti_session_open(model_dir, NULL, NULL) == DTI_INVALID_ARGUMENT);
  CHECK(strcmp(dti_status_name((dti_status)99), "unknown") == 0);

  /* Free functions accept NULL; accessors of NULL results are empty. */
  dti_session_close(NULL);
  dti_result_free(NULL);
  dti_string_free(NULL);
  CHECK(dti_result_num_sequences(NULL) == 0);
  CHECK(dti_result_text(NULL, 0, NULL) == NULL);
  CHECK(dti_result_finish_reason(NULL, 0) == -1);
}

/* --- streaming ----------------------------------------------------------------------- */
typedef struct {
  int32_t tokens[256];
  size_t count;
  char text[4096];
  size_t text_len;
  size_t stop_after; /* 0 = never */
} stream_state;

static int on_token(void* user, int32_t token, const char* text, size_t len, int32_t sample,
                    int32_t step) {
  stream_state* st = (stream_state*)user;
  if (sample != 0 || step != (int32_t)st->count || st->count >= 256) return 0;
  st->tokens[st->count++] = token;
  if (st->text_len + len < sizeof st->text) {
    memcpy(st->text + st->text_len, text, len);
    st->text_len += len;
    st->text[st->text_len] = '\0';
  }
  return st->stop_after == 0 || st->count < st->stop_after;
}

static int same_tokens(const dti_result* a, const dti_result* b) {
  size_t na = 0, nb = 0;
  const int32_t* ta = dti_result_tokens(a, 0, &na);
  const int32_t* tb = dti_result_tokens(b, 0, &nb);
  return ta && tb && na == nb && memcmp(ta, tb, na * sizeof(int32_t)) == 0 &&
         dti_result_digest(a, 0) == dti_result_digest(b, 0);
}

/* --- concurrency: requests from several threads equal the same requests alone ---------- */
typedef struct {
  dti_session* session;
  uint64_t seed;
  dti_result* result;
  dti_status status;
} thread_job;

static void* run_job(void* arg) {
  thread_job* job = (thread_job*)arg;
  dti_generation_config c = dti_generation_config_default();
  c.max_new_tokens = 12;
  c.temperature = 0.9f;
  c.has_seed = 1;
  c.seed = job->seed;
  job->status =
      dti_generate_text(job->session, "concurrent requests", &c, NULL, NULL, &job->result);
  return NULL;
}

static void test_session(void) {
  dti_session_options o = dti_session_options_default();
  o.threads = 2;
  o.fingerprint_level = 2;
  dti_session* s = NULL;
  CHECK_OK(dti_session_open(model_dir, &o, &s));
  if (s == NULL) return;

  char* fp = NULL;
  char fp_hex[33] = "";
  CHECK_OK(dti_session_model_fingerprint(s, &fp));
  CHECK(fp != NULL && strlen(fp) == 32);
  if (fp != NULL) memcpy(fp_hex, fp, 33);
  dti_string_free(fp);
  int64_t vocab = 0;
  CHECK_OK(dti_session_vocab_size(s, &vocab));
  CHECK(vocab > 0);

  /* Greedy text generation, twice: the same bits. */
  dti_generation_config c = dti_generation_config_default();
  c.max_new_tokens = 8;
  c.ignore_eos = 1;
  dti_result* r1 = NULL;
  dti_result* r2 = NULL;
  CHECK_OK(dti_generate_text(s, "The quick brown fox", &c, NULL, NULL, &r1));
  CHECK_OK(dti_generate_text(s, "The quick brown fox", &c, NULL, NULL, &r2));
  if (r1 && r2) {
    size_t n = 0, len = 0;
    CHECK(dti_result_num_sequences(r1) == 1);
    CHECK(dti_result_tokens(r1, 0, &n) != NULL && n == 8);
    CHECK(dti_result_text(r1, 0, &len) != NULL);
    CHECK(dti_result_finish_reason(r1, 0) == DTI_FINISH_LENGTH);
    CHECK(dti_result_digest(r1, 0) != 0);
    CHECK(same_tokens(r1, r2));
    CHECK(dti_result_tokens(r1, 1, &n) == NULL && n == 0);
    CHECK(dti_result_finish_reason(r1, 1) == -1);
    /* The fingerprint JSON line carries the model fingerprint and the step digests. */
    const char* json = dti_result_fingerprint_json(r1);
    CHECK(json != NULL && json[0] == '{' && strchr(json, '\n') == NULL);
    CHECK(json != NULL && strstr(json, fp_hex) != NULL);
    CHECK(json != NULL && strstr(json, "step_digests") != NULL);

    /* The same prompt as token ids gives the same output. */
    size_t np = 0;
    const int32_t* prompt = dti_result_prompt_tokens(r1, &np);
    CHECK(prompt != NULL && np > 0);
    dti_result* r3 = NULL;
    CHECK_OK(dti_generate_tokens(s, prompt, np, &c, NULL, NULL, &r3));
    CHECK(r3 && same_tokens(r1, r3));
    dti_result_free(r3);

    /* Streaming delivers exactly the result's tokens and text. */
    stream_state st;
    memset(&st, 0, sizeof st);
    dti_result* r4 = NULL;
    CHECK_OK(dti_generate_text(s, "The quick brown fox", &c, on_token, &st, &r4));
    size_t n4 = 0, len4 = 0;
    const int32_t* t4 = dti_result_tokens(r4, 0, &n4);
    const char* text4 = dti_result_text(r4, 0, &len4);
    CHECK(r4 && st.count == n4 && memcmp(st.tokens, t4, n4 * sizeof(int32_t)) == 0);
    CHECK(r4 && st.text_len == len4 && memcmp(st.text, text4, len4) == 0);
    CHECK(same_tokens(r1, r4));
    dti_result_free(r4);

    /* A callback returning 0 cancels the request. */
    memset(&st, 0, sizeof st);
    st.stop_after = 3;
    dti_result* r5 = NULL;
    CHECK_OK(dti_generate_text(s, "The quick brown fox", &c, on_token, &st, &r5));
    CHECK(r5 && dti_result_finish_reason(r5, 0) == DTI_FINISH_CANCELLED);
    size_t n5 = 0;
    dti_result_tokens(r5, 0, &n5);
    CHECK(n5 == 3);
    dti_result_free(r5);
  }
  dti_result_free(r1);
  dti_result_free(r2);

  /* Invalid generation configs and prompts come back as codes with messages. */
  dti_result* bad = (dti_result*)0x1;
  c = dti_generation_config_default();
  c.temperature = -1.0f;
  CHECK(dti_generate_text(s, "x", &c, NULL, NULL, &bad) == DTI_INVALID_ARGUMENT);
  CHECK(bad == NULL);
  CHECK(strstr(dti_last_error(), "temperature") != NULL);
  c = dti_generation_config_default();
  c.struct_size = 0;
  CHECK(dti_generate_text(s, "x", &c, NULL, NULL, &bad) == DTI_INVALID_ARGUMENT);
  const int32_t out_of_range[2] = {1, 1 << 30};
  CHECK(dti_generate_tokens(s, out_of_range, 2, NULL, NULL, NULL, &bad) == DTI_INVALID_ARGUMENT);
  CHECK(dti_generate_tokens(s, NULL, 0, NULL, NULL, NULL, &bad) == DTI_INVALID_ARGUMENT);
  CHECK(dti_generate_text(s, NULL, NULL, NULL, NULL, &bad) == DTI_INVALID_ARGUMENT);

  /* Seeded sampling from 3 threads at once equals the same requests one at a time. */
  thread_job jobs[3];
  pthread_t threads[3];
  for (int i = 0; i < 3; ++i) {
    memset(&jobs[i], 0, sizeof jobs[i]);
    jobs[i].session = s;
    jobs[i].seed = 1000u + (uint64_t)i;
  }
  for (int i = 0; i < 3; ++i) pthread_create(&threads[i], NULL, run_job, &jobs[i]);
  for (int i = 0; i < 3; ++i) pthread_join(threads[i], NULL);
  for (int i = 0; i < 3; ++i) {
    thread_job alone;
    memset(&alone, 0, sizeof alone);
    alone.session = s;
    alone.seed = jobs[i].seed;
    run_job(&alone);
    CHECK(jobs[i].status == DTI_OK && alone.status == DTI_OK);
    CHECK(same_tokens(jobs[i].result, alone.result));
    CHECK(dti_result_seed(alone.result) == jobs[i].seed);
    dti_result_free(alone.result);
    dti_result_free(jobs[i].result);
  }

  /* Metrics in the Prometheus text format. */
  char* metrics = NULL;
  CHECK_OK(dti_session_metrics_text(s, &metrics));
  CHECK(metrics != NULL &&
        strstr(metrics, "detinfer_requests_total{finish_reason=\"length\"}") != NULL);
  CHECK(metrics != NULL &&
        strstr(metrics, "detinfer_requests_total{finish_reason=\"cancelled\"} 1") != NULL);
  CHECK(metrics != NULL && strstr(metrics, "detinfer_generated_tokens_total") != NULL);
  dti_string_free(metrics);

  dti_session_close(s);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <tiny model dir>\n", argv[0]);
    return 2;
  }
  model_dir = argv[1];
  CHECK(strncmp(dti_version(), "0.", 2) == 0);
  test_errors();
  test_session();
  if (failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("capi_test: all checks passed\n");
  return 0;
}
