/* The C API's chat functions from C11: dti_apply_chat_template (the tiny model's ChatML
 * template, exact text), dti_chat (reproducible, model defaults when config is NULL),
 * dti_session_default_generation_config and the errors of malformed input.
 * Usage: capi_chat_test <tiny model dir>. */
#include <stdio.h>
#include <string.h>

#include "detinfer/c_api.h"

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

static const char* kMessages =
    "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
    "\"Hi\"}]";

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: capi_chat_test <tiny model dir>\n");
    return 2;
  }
  dti_session_options so = dti_session_options_default();
  so.threads = 1;
  dti_session* s = NULL;
  if (dti_session_open(argv[1], &so, &s) != DTI_OK) {
    fprintf(stderr, "open: %s\n", dti_last_error());
    return 1;
  }

  char* prompt = NULL;
  CHECK(dti_apply_chat_template(s, kMessages, NULL, &prompt) == DTI_OK);
  CHECK(prompt != NULL &&
        strcmp(prompt,
               "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
               "<|im_start|>assistant\n") == 0);
  dti_string_free(prompt);
  dti_chat_options o = dti_chat_options_default();
  o.add_generation_prompt = 0;
  CHECK(dti_apply_chat_template(s, kMessages, &o, &prompt) == DTI_OK);
  CHECK(prompt != NULL && strstr(prompt, "assistant") == NULL);
  dti_string_free(prompt);

  dti_generation_config d;
  memset(&d, 0, sizeof d);
  CHECK(dti_session_default_generation_config(s, &d) == DTI_OK);
  CHECK(d.struct_size == sizeof(dti_generation_config));
  CHECK(d.temperature == 0.0f); /* the tiny model's generation_config.json: do_sample false */

  dti_result* a = NULL;
  dti_result* b = NULL;
  dti_generation_config c = dti_generation_config_default();
  c.max_new_tokens = 6;
  c.temperature = 0.8f;
  c.has_seed = 1;
  c.seed = 9;
  CHECK(dti_chat(s, kMessages, NULL, &c, NULL, NULL, &a) == DTI_OK);
  CHECK(dti_chat(s, kMessages, NULL, &c, NULL, NULL, &b) == DTI_OK);
  CHECK(a != NULL && b != NULL && dti_result_digest(a, 0) == dti_result_digest(b, 0));
  CHECK(a != NULL && dti_result_seed(a) == 9);
  dti_result_free(a);
  dti_result_free(b);
  a = NULL;
  CHECK(dti_chat(s, kMessages, NULL, NULL, NULL, NULL, &a) == DTI_OK); /* model defaults */
  CHECK(a != NULL && dti_result_num_sequences(a) == 1);
  dti_result_free(a);

  a = NULL;
  CHECK(dti_chat(s, "[{\"content\": \"x\"}]", NULL, NULL, NULL, NULL, &a) == DTI_INVALID_ARGUMENT);
  CHECK(a == NULL && strstr(dti_last_error(), "messages[0].role") != NULL);
  o = dti_chat_options_default();
  o.tools_json = "{\"not\": \"a list\"}";
  CHECK(dti_apply_chat_template(s, kMessages, &o, &prompt) == DTI_INVALID_ARGUMENT);
  CHECK(prompt == NULL && strstr(dti_last_error(), "tools") != NULL);
  o.struct_size = 3;
  CHECK(dti_apply_chat_template(s, kMessages, &o, &prompt) == DTI_INVALID_ARGUMENT);
  CHECK(dti_apply_chat_template(s, NULL, NULL, &prompt) == DTI_INVALID_ARGUMENT);

  dti_session_close(s);
  if (failures != 0) fprintf(stderr, "%d checks failed\n", failures);
  return failures == 0 ? 0 : 1;
}
