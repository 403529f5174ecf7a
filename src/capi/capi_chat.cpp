// The C ABI's chat functions (include/detinfer/c_api.h, "Chat"; docs/chat.md): messages
// and options as JSON text over DeterministicSession's chat API.
#include <memory>
#include <string>
#include <vector>

#include "capi/capi_internal.h"
#include "detinfer/chat.h"

namespace detinfer::capi {
namespace {

dti_status to_chat_options(const char* function, const dti_chat_options* in,
                           ChatTemplateOptions* out) {
  if (in == nullptr) return DTI_OK;  // defaults
  if (in->struct_size != sizeof(dti_chat_options)) {
    return set_error(DTI_INVALID_ARGUMENT, std::string(function) +
                                               ": dti_chat_options.struct_size is " +
                                               std::to_string(in->struct_size) + ", expected " +
                                               std::to_string(sizeof(dti_chat_options)) +
                                               " (initialize it with dti_chat_options_default())");
  }
  out->add_generation_prompt = in->add_generation_prompt != 0;
  if (in->tools_json != nullptr) out->tools_json = in->tools_json;
  if (in->extra_variables_json != nullptr) out->extra_variables_json = in->extra_variables_json;
  if (in->template_name != nullptr) out->template_name = in->template_name;
  if (in->has_now != 0) out->now_unix_seconds = in->now_unix_seconds;
  return DTI_OK;
}

// The shared part of the chat entry points: resets *out, checks the arguments and
// converts the options, then runs `run(options)` under the exception barrier.
template <typename Out, typename F>
dti_status with_chat(const char* fn, const dti_session* session, const char* messages_json,
                     const dti_chat_options* options, Out** out, F&& run) {
  if (out == nullptr) return null_argument(fn, "out");
  *out = nullptr;
  if (session == nullptr) return null_argument(fn, "session");
  if (messages_json == nullptr) return null_argument(fn, "messages_json");
  return guarded(fn, [&] {
    ChatTemplateOptions o;
    if (dti_status s = to_chat_options(fn, options, &o); s != DTI_OK) return s;
    return run(o);
  });
}

}  // namespace
}  // namespace detinfer::capi

extern "C" {

using detinfer::capi::guarded;
using detinfer::capi::null_argument;

dti_chat_options dti_chat_options_default(void) {
  dti_chat_options o{};
  o.struct_size = sizeof(dti_chat_options);
  o.add_generation_prompt = 1;
  return o;
}

dti_status dti_apply_chat_template(const dti_session* session, const char* messages_json,
                                   const dti_chat_options* options, char** out) {
  return detinfer::capi::with_chat(
      "dti_apply_chat_template", session, messages_json, options, out,
      [&](const detinfer::ChatTemplateOptions& o) {
        const auto messages = detinfer::chat_messages_from_json(messages_json);
        *out = detinfer::capi::copy_string(session->session.apply_chat_template(messages, o));
        return DTI_OK;
      });
}

dti_status dti_chat(dti_session* session, const char* messages_json,
                    const dti_chat_options* options, const dti_generation_config* config,
                    dti_token_callback on_token, void* user_data, dti_result** out) {
  const char* fn = "dti_chat";
  return detinfer::capi::with_chat(
      fn, session, messages_json, options, out, [&](const detinfer::ChatTemplateOptions& o) {
        detinfer::GenerationConfig gc = session->session.default_generation_config();
        if (config != nullptr) {
          if (dti_status s = detinfer::capi::to_generation_config(fn, config, &gc); s != DTI_OK) {
            return s;
          }
        }
        const auto messages = detinfer::chat_messages_from_json(messages_json);
        auto result = std::make_unique<dti_result>();
        result->result = session->session.chat(messages, gc, o,
                                               detinfer::capi::to_callback(on_token, user_data));
        *out = result.release();
        return DTI_OK;
      });
}

dti_status dti_session_default_generation_config(const dti_session* session,
                                                 dti_generation_config* out) {
  const char* fn = "dti_session_default_generation_config";
  if (out == nullptr) return null_argument(fn, "out");
  if (session == nullptr) return null_argument(fn, "session");
  return guarded(fn, [&] {
    const detinfer::GenerationConfig d = session->session.default_generation_config();
    dti_generation_config c = dti_generation_config_default();
    detinfer::capi::from_generation_config(d, &c);
    *out = c;
    return DTI_OK;
  });
}

}  // extern "C"
