// The C ABI's tokenizer, replay and logging entry points.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "capi/capi_internal.h"
#include "detinfer/logging.h"
#include "detinfer/replay_report.h"
#include "detinfer/tokenizer.h"

using detinfer::capi::guarded;
using detinfer::capi::null_argument;

namespace {

const detinfer::Tokenizer& tokenizer_of(const dti_session* session) {
  const detinfer::Tokenizer* t = session->session.tokenizer();
  if (t == nullptr) {
    throw detinfer::Error(detinfer::ErrorCode::kUnsupported,
                          "the model folder has no tokenizer.json");
  }
  return *t;
}

}  // namespace

extern "C" {

dti_status dti_tokenize(const dti_session* session, const char* text, size_t text_len,
                        int32_t** tokens, size_t* count) {
  const char* fn = "dti_tokenize";
  if (tokens == nullptr) return null_argument(fn, "tokens");
  *tokens = nullptr;
  if (count == nullptr) return null_argument(fn, "count");
  *count = 0;
  if (session == nullptr) return null_argument(fn, "session");
  if (text == nullptr && text_len != 0) return null_argument(fn, "text");
  return guarded(fn, [&] {
    const std::vector<std::int32_t> ids =
        tokenizer_of(session).encode(std::string_view(text == nullptr ? "" : text, text_len));
    auto* out = static_cast<int32_t*>(::operator new((ids.size() + 1) * sizeof(int32_t)));
    std::copy(ids.begin(), ids.end(), out);
    *tokens = out;
    *count = ids.size();
    return DTI_OK;
  });
}

dti_status dti_detokenize(const dti_session* session, const int32_t* tokens, size_t count,
                          int32_t skip_special, char** text, size_t* len) {
  const char* fn = "dti_detokenize";
  if (text == nullptr) return null_argument(fn, "text");
  *text = nullptr;
  if (session == nullptr) return null_argument(fn, "session");
  if (tokens == nullptr && count != 0) return null_argument(fn, "tokens");
  return guarded(fn, [&] {
    const std::vector<std::int32_t> ids(tokens, tokens + count);
    const std::string s = tokenizer_of(session).decode(ids, skip_special != 0);
    *text = detinfer::capi::copy_string(s);
    if (len != nullptr) *len = s.size();
    return DTI_OK;
  });
}

void dti_tokens_free(int32_t* tokens) { ::operator delete(tokens); }

dti_status dti_replay(dti_session* session, const char* fingerprint_json, int32_t* verdict,
                      char** report) {
  const char* fn = "dti_replay";
  if (verdict == nullptr) return null_argument(fn, "verdict");
  if (report != nullptr) *report = nullptr;
  if (session == nullptr) return null_argument(fn, "session");
  if (fingerprint_json == nullptr) return null_argument(fn, "fingerprint_json");
  return guarded(fn, [&] {
    const detinfer::ReplayReport r = session->session.replay(std::string(fingerprint_json));
    *verdict = static_cast<int32_t>(r.verdict);
    if (report != nullptr) *report = detinfer::capi::copy_string(r.to_text());
    return DTI_OK;
  });
}

dti_status dti_verify(dti_session* session, const char* transcript_json, int32_t* verified,
                      char** report) {
  const char* fn = "dti_verify";
  if (verified == nullptr) return null_argument(fn, "verified");
  *verified = 0;
  if (report != nullptr) *report = nullptr;
  if (session == nullptr) return null_argument(fn, "session");
  if (transcript_json == nullptr) return null_argument(fn, "transcript_json");
  return guarded(fn, [&] {
    const detinfer::VerifyResult r =
        session->session.verify(detinfer::Transcript::from_json(transcript_json));
    *verified = r.verified ? 1 : 0;
    if (report != nullptr) *report = detinfer::capi::copy_string(r.message);
    return DTI_OK;
  });
}

void dti_log_set(dti_log_callback callback, void* user_data) {
  if (callback == nullptr) {
    detinfer::set_log_callback({});
    return;
  }
  detinfer::set_log_callback(
      [callback, user_data](detinfer::LogLevel level, std::string_view message) {
        const std::string text(message);  // NUL-terminated for C
        callback(user_data, static_cast<int32_t>(level), text.c_str(), text.size());
      });
}

dti_status dti_log_set_level(int32_t level) {
  if (level < 0 || level > static_cast<int32_t>(detinfer::LogLevel::kOff)) {
    return detinfer::capi::set_error(
        DTI_INVALID_ARGUMENT,
        "dti_log_set_level: level must be 0 (trace) .. 6 (off), got " + std::to_string(level));
  }
  detinfer::set_log_level(static_cast<detinfer::LogLevel>(level));
  return DTI_OK;
}

}  // extern "C"
