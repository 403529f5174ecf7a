// Shared by the C ABI's translation units (include/detinfer/c_api.h): the handle types
// behind the opaque C structs, the thread-local last error, the exception barrier and
// the conversions of the C option structs.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "detinfer/c_api.h"
#include "detinfer/error.h"
#include "detinfer/session.h"

struct dti_session {
  detinfer::DeterministicSession session;
};

struct dti_result {
  detinfer::GenerationResult result;
};

struct dti_request {
  detinfer::RequestHandle handle;
  bool waited = false;  // dti_request_wait consumed the future
};

namespace detinfer::capi {

// The message of the last failed call on this thread (dti_last_error).
std::string& last_error();

inline dti_status set_error(dti_status status, std::string message) {
  last_error() = std::move(message);
  return status;
}

// Runs fn (which returns a dti_status) and converts every exception into a status; an
// Error's offending field is appended to the message ("(field: temperature)").
template <typename F>
dti_status guarded(const char* function, F&& fn) noexcept {
  try {
    return fn();
  } catch (const Error& e) {
    std::string message = std::string(function) + ": " + e.what();
    if (!e.field().empty()) message += " (field: " + e.field() + ")";
    return set_error(static_cast<dti_status>(e.code()), std::move(message));
  } catch (const std::bad_alloc&) {
    return set_error(DTI_RESOURCE_EXHAUSTED, std::string(function) + ": out of memory");
  } catch (const std::exception& e) {
    return set_error(DTI_INTERNAL, std::string(function) + ": " + e.what());
  } catch (...) {
    return set_error(DTI_INTERNAL, std::string(function) + ": unknown exception");
  }
}

inline dti_status null_argument(const char* function, const char* what) {
  return set_error(DTI_INVALID_ARGUMENT, std::string(function) + ": " + what + " is NULL");
}

// Copies bytes into a NUL-terminated string for dti_string_free.
inline char* copy_string(const std::string& s) {
  char* out = static_cast<char*>(::operator new(s.size() + 1));
  std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return out;
}

// The shared part of the generate / submit entry points: resets *out, checks the session
// and the prompt, then runs `run(prompt)` under the exception barrier.
template <typename Out, typename F>
dti_status with_text_prompt(const char* fn, const dti_session* session, const char* text, Out** out,
                            F&& run) {
  if (out == nullptr) return null_argument(fn, "out");
  *out = nullptr;
  if (session == nullptr) return null_argument(fn, "session");
  if (text == nullptr) return null_argument(fn, "prompt");
  return guarded(fn, [&] { return run(Prompt(std::string(text))); });
}
template <typename Out, typename F>
dti_status with_token_prompt(const char* fn, const dti_session* session, const int32_t* ids,
                             std::size_t count, Out** out, F&& run) {
  if (out == nullptr) return null_argument(fn, "out");
  *out = nullptr;
  if (session == nullptr) return null_argument(fn, "session");
  if (ids == nullptr && count != 0) return null_argument(fn, "prompt_tokens");
  return guarded(fn, [&] { return run(Prompt(std::vector<std::int32_t>(ids, ids + count))); });
}

// C options -> C++ (capi_options.cpp). `in` may be NULL (defaults). They accept every
// struct_size of a released version and take the fields a caller's version lacks from
// the defaults.
dti_status to_session_options(const char* function, const dti_session_options* in,
                              SessionOptions* out);
// C++ -> C, every member the C struct has (its struct_size is left as is). The string
// members point into `in` (NULL for ""), so `in` must outlive *out. Fails with
// DTI_INVALID_ARGUMENT for a value C cannot express (device_invariant mode, the logits
// fingerprint level). Both directions iterate the SessionOptions field table
// (session/session_fields.h).
dti_status from_session_options(const SessionOptions& in, dti_session_options* out);
// Both driven by the GenerationConfig field table (core/generation_fields.h). C -> C++
// sets every field of *out from `in` except stop_token_ids, which keeps *out's value when
// in->stop_token_ids is NULL (the model's eos ids).
dti_status to_generation_config(const char* function, const dti_generation_config* in,
                                GenerationConfig* out);
// C++ -> C: the scalar fields and the seed; the list pointers of *out are left untouched.
void from_generation_config(const GenerationConfig& in, dti_generation_config* out);
TokenCallback to_callback(dti_token_callback cb, void* user_data);

}  // namespace detinfer::capi
