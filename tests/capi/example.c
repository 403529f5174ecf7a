/* The C API example of docs/embedding.md (route 2), built and run by ctest (capi_example).
 * Usage: example <model dir> */
#include <stdio.h>
#include "detinfer/c_api.h"

static int print_token(void* user, int32_t token, const char* text, size_t len,
                       int32_t sample, int32_t step) {
  (void)user; (void)token; (void)sample; (void)step;
  fwrite(text, 1, len, stdout);
  return 1;                                         /* 0 would cancel */
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;                          /* usage: example <model dir> */
  dti_session_options opts = dti_session_options_default();
  opts.threads = 2;
  dti_session* s = NULL;
  if (dti_session_open(argv[1], &opts, &s) != DTI_OK) {
    fprintf(stderr, "open: %s\n", dti_last_error());   /* e.g. not_found naming the file */
    return 1;
  }
  dti_generation_config cfg = dti_generation_config_default();
  cfg.max_new_tokens = 32;
  cfg.temperature = 0.7f;
  cfg.has_seed = 1;
  cfg.seed = 42;                                    /* same seed, same bits */
  dti_result* r = NULL;
  if (dti_generate_text(s, "Once upon a time", &cfg, print_token, NULL, &r) == DTI_OK) {
    size_t n = 0;
    const int32_t* tokens = dti_result_tokens(r, 0, &n);
    printf("\n%zu tokens, first %d, digest %016llx\n", n, n ? tokens[0] : -1,
           (unsigned long long)dti_result_digest(r, 0));
    dti_result_free(r);
  } else {
    fprintf(stderr, "generate: %s\n", dti_last_error());
  }
  dti_session_close(s);
  return 0;
}
