// The C ABI (include/detinfer/c_api.h) over DeterministicSession. Every entry point
// catches everything: a C caller gets a status and a thread-local message, never an
// exception or an abort.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "capi/capi_internal.h"
#include "detinfer/version.h"

namespace detinfer::capi {

std::string& last_error() {
  thread_local std::string message;
  return message;
}

namespace {

dti_status generate(const char* function, dti_session* session, const Prompt& prompt,
                    const dti_generation_config* config, dti_token_callback on_token,
                    void* user_data, dti_result** out) {
  GenerationConfig gc;
  if (dti_status s = to_generation_config(function, config, &gc); s != DTI_OK) return s;
  auto result = std::make_unique<dti_result>();
  result->result = session->session.generate(prompt, gc, to_callback(on_token, user_data));
  *out = result.release();
  return DTI_OK;
}

const Sequence* sequence_at(const dti_result* r, std::size_t i) {
  if (r == nullptr || i >= r->result.sequences.size()) return nullptr;
  return &r->result.sequences[i];
}

}  // namespace
}  // namespace detinfer::capi

using detinfer::capi::guarded;
using detinfer::capi::null_argument;

extern "C" {

const char* dti_status_name(dti_status status) {
  if (status == DTI_OK) return "ok";
  if (status < DTI_INVALID_ARGUMENT || status > DTI_INTERNAL) return "unknown";
  return detinfer::to_string(static_cast<detinfer::ErrorCode>(status));
}

const char* dti_last_error(void) { return detinfer::capi::last_error().c_str(); }

const char* dti_version(void) { return DETINFER_VERSION_STRING; }

dti_status dti_session_open(const char* model_dir, const dti_session_options* options,
                            dti_session** out) {
  const char* fn = "dti_session_open";
  if (out == nullptr) return null_argument(fn, "out");
  *out = nullptr;
  if (model_dir == nullptr) return null_argument(fn, "model_dir");
  return guarded(fn, [&] {
    detinfer::SessionOptions so;
    if (dti_status s = detinfer::capi::to_session_options(fn, options, &so); s != DTI_OK) {
      return s;
    }
    auto session = std::make_unique<dti_session>(
        dti_session{detinfer::DeterministicSession::open(model_dir, so)});
    *out = session.release();
    return DTI_OK;
  });
}

void dti_session_close(dti_session* session) {
  if (session == nullptr) return;
  guarded("dti_session_close", [&] {
    session->session.close();
    return DTI_OK;
  });
  delete session;
}

dti_status dti_session_model_fingerprint(const dti_session* session, char** out) {
  const char* fn = "dti_session_model_fingerprint";
  if (out == nullptr) return null_argument(fn, "out");
  *out = nullptr;
  if (session == nullptr) return null_argument(fn, "session");
  return guarded(fn, [&] {
    *out = detinfer::capi::copy_string(session->session.model_fingerprint());
    return DTI_OK;
  });
}

dti_status dti_session_vocab_size(const dti_session* session, int64_t* out) {
  const char* fn = "dti_session_vocab_size";
  if (out == nullptr) return null_argument(fn, "out");
  if (session == nullptr) return null_argument(fn, "session");
  return guarded(fn, [&] {
    *out = session->session.vocab_size();
    return DTI_OK;
  });
}

dti_status dti_session_metrics_text(const dti_session* session, char** out) {
  const char* fn = "dti_session_metrics_text";
  if (out == nullptr) return null_argument(fn, "out");
  *out = nullptr;
  if (session == nullptr) return null_argument(fn, "session");
  return guarded(fn, [&] {
    *out = detinfer::capi::copy_string(session->session.metrics_text());
    return DTI_OK;
  });
}

void dti_string_free(char* s) { ::operator delete(s); }

dti_status dti_generate_text(dti_session* session, const char* prompt,
                             const dti_generation_config* config, dti_token_callback on_token,
                             void* user_data, dti_result** out) {
  const char* fn = "dti_generate_text";
  return detinfer::capi::with_text_prompt(fn, session, prompt, out, [&](const detinfer::Prompt& p) {
    return detinfer::capi::generate(fn, session, p, config, on_token, user_data, out);
  });
}

dti_status dti_generate_tokens(dti_session* session, const int32_t* prompt_tokens,
                               size_t num_prompt_tokens, const dti_generation_config* config,
                               dti_token_callback on_token, void* user_data, dti_result** out) {
  const char* fn = "dti_generate_tokens";
  return detinfer::capi::with_token_prompt(
      fn, session, prompt_tokens, num_prompt_tokens, out, [&](const detinfer::Prompt& p) {
        return detinfer::capi::generate(fn, session, p, config, on_token, user_data, out);
      });
}

size_t dti_result_num_sequences(const dti_result* result) {
  return result == nullptr ? 0 : result->result.sequences.size();
}

const char* dti_result_text(const dti_result* result, size_t i, size_t* len) {
  const detinfer::Sequence* s = detinfer::capi::sequence_at(result, i);
  if (len != nullptr) *len = s ? s->text.size() : 0;
  return s ? s->text.c_str() : nullptr;
}

const int32_t* dti_result_tokens(const dti_result* result, size_t i, size_t* count) {
  const detinfer::Sequence* s = detinfer::capi::sequence_at(result, i);
  if (count != nullptr) *count = s ? s->tokens.size() : 0;
  return s ? s->tokens.data() : nullptr;
}

int32_t dti_result_finish_reason(const dti_result* result, size_t i) {
  const detinfer::Sequence* s = detinfer::capi::sequence_at(result, i);
  return s ? static_cast<int32_t>(s->finish_reason) : -1;
}

uint64_t dti_result_digest(const dti_result* result, size_t i) {
  const detinfer::Sequence* s = detinfer::capi::sequence_at(result, i);
  return s ? s->digest : 0;
}

const int32_t* dti_result_prompt_tokens(const dti_result* result, size_t* count) {
  if (count != nullptr) *count = result ? result->result.prompt_tokens.size() : 0;
  return result ? result->result.prompt_tokens.data() : nullptr;
}

uint64_t dti_result_seed(const dti_result* result) {
  return result == nullptr ? 0 : result->result.seed;
}

const char* dti_result_fingerprint_json(const dti_result* result) {
  return result == nullptr ? "" : result->result.fingerprint_json.c_str();
}

const char* dti_result_transcript_json(const dti_result* result) {
  return result == nullptr ? "" : result->result.transcript_json.c_str();
}

size_t dti_result_num_logprob_steps(const dti_result* result, size_t i) {
  const detinfer::Sequence* s = detinfer::capi::sequence_at(result, i);
  return s ? s->logprobs.size() : 0;
}

dti_status dti_result_logprob(const dti_result* result, size_t i, size_t step, size_t rank,
                              int32_t* token, float* logprob, size_t* num_top) {
  const char* fn = "dti_result_logprob";
  if (result == nullptr) return null_argument(fn, "result");
  if (token == nullptr) return null_argument(fn, "token");
  if (logprob == nullptr) return null_argument(fn, "logprob");
  const detinfer::Sequence* s = detinfer::capi::sequence_at(result, i);
  if (s == nullptr || step >= s->logprobs.size()) {
    return detinfer::capi::set_error(
        DTI_INVALID_ARGUMENT, std::string(fn) + ": no logprobs at sequence " + std::to_string(i) +
                                  ", step " + std::to_string(step) + " (" +
                                  std::to_string(s ? s->logprobs.size() : 0) + " steps)");
  }
  const detinfer::StepLogprobs& lp = s->logprobs[step];
  if (num_top != nullptr) *num_top = lp.top.size();
  if (rank > lp.top.size()) {
    return detinfer::capi::set_error(DTI_INVALID_ARGUMENT,
                                     std::string(fn) + ": rank " + std::to_string(rank) +
                                         " > top-N size " + std::to_string(lp.top.size()));
  }
  *token = rank == 0 ? lp.token : lp.top[rank - 1].token;
  *logprob = rank == 0 ? lp.logprob : lp.top[rank - 1].logprob;
  return DTI_OK;
}

void dti_result_free(dti_result* result) { delete result; }

}  // extern "C"
