// Asynchronous requests of the C ABI: submit, cancel, done, wait, free.
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "capi/capi_internal.h"

namespace detinfer::capi {
namespace {

dti_status submit(const char* function, dti_session* session, const Prompt& prompt,
                  const dti_generation_config* config, dti_token_callback on_token, void* user_data,
                  dti_request** out) {
  GenerationConfig gc;
  if (dti_status s = to_generation_config(function, config, &gc); s != DTI_OK) return s;
  auto request = std::make_unique<dti_request>();
  request->handle = session->session.submit(prompt, gc, to_callback(on_token, user_data));
  *out = request.release();
  return DTI_OK;
}

}  // namespace
}  // namespace detinfer::capi

using detinfer::capi::guarded;
using detinfer::capi::null_argument;

extern "C" {

dti_status dti_submit_text(dti_session* session, const char* prompt,
                           const dti_generation_config* config, dti_token_callback on_token,
                           void* user_data, dti_request** out) {
  const char* fn = "dti_submit_text";
  return detinfer::capi::with_text_prompt(fn, session, prompt, out, [&](const detinfer::Prompt& p) {
    return detinfer::capi::submit(fn, session, p, config, on_token, user_data, out);
  });
}

dti_status dti_submit_tokens(dti_session* session, const int32_t* prompt_tokens,
                             size_t num_prompt_tokens, const dti_generation_config* config,
                             dti_token_callback on_token, void* user_data, dti_request** out) {
  const char* fn = "dti_submit_tokens";
  return detinfer::capi::with_token_prompt(
      fn, session, prompt_tokens, num_prompt_tokens, out, [&](const detinfer::Prompt& p) {
        return detinfer::capi::submit(fn, session, p, config, on_token, user_data, out);
      });
}

dti_status dti_request_cancel(dti_request* request) {
  const char* fn = "dti_request_cancel";
  if (request == nullptr) return null_argument(fn, "request");
  return guarded(fn, [&] {
    request->handle.cancel();
    return DTI_OK;
  });
}

int32_t dti_request_done(const dti_request* request) {
  if (request == nullptr) return 0;
  if (request->waited) return 1;
  auto& future = const_cast<dti_request*>(request)->handle.future();
  return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready ? 1 : 0;
}

dti_status dti_request_wait(dti_request* request, dti_result** out) {
  const char* fn = "dti_request_wait";
  if (out == nullptr) return null_argument(fn, "out");
  *out = nullptr;
  if (request == nullptr) return null_argument(fn, "request");
  if (request->waited) {
    return detinfer::capi::set_error(DTI_INVALID_ARGUMENT,
                                     std::string(fn) + ": the request was already waited for");
  }
  request->waited = true;
  return guarded(fn, [&] {
    auto result = std::make_unique<dti_result>();
    result->result = request->handle.get();
    *out = result.release();
    return DTI_OK;
  });
}

void dti_request_free(dti_request* request) {
  if (request == nullptr) return;
  if (!request->waited) {
    guarded("dti_request_free", [&] {
      request->handle.cancel();
      request->handle.future().wait();  // the callback's user_data may go away after this
      return DTI_OK;
    });
  }
  delete request;
}

}  // extern "C"
