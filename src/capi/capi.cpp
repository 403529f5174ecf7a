// The C ABI (include/detinfer/c_api.h) over DeterministicSession. Every entry point
// catches everything: a C caller gets a status and a thread-local message, never an
// exception or an abort.
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/generation_fields.h"
#include "detinfer/c_api.h"
#include "detinfer/error.h"
#include "detinfer/fingerprint_recorder.h"
#include "detinfer/session.h"
#include "detinfer/version.h"

struct dti_session {
  detinfer::DeterministicSession session;
};

struct dti_result {
  detinfer::GenerationResult result;
};

namespace detinfer::capi {
namespace {

thread_local std::string last_error;

dti_status set_error(dti_status status, std::string message) {
  last_error = std::move(message);
  return status;
}

// Runs fn (which returns a dti_status) and converts every exception into a status.
template <typename F>
dti_status guarded(const char* function, F&& fn) noexcept {
  try {
    return fn();
  } catch (const Error& e) {
    return set_error(static_cast<dti_status>(e.code()), std::string(function) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return set_error(DTI_RESOURCE_EXHAUSTED, std::string(function) + ": out of memory");
  } catch (const std::exception& e) {
    return set_error(DTI_INTERNAL, std::string(function) + ": " + e.what());
  } catch (...) {
    return set_error(DTI_INTERNAL, std::string(function) + ": unknown exception");
  }
}

dti_status null_argument(const char* function, const char* what) {
  return set_error(DTI_INVALID_ARGUMENT, std::string(function) + ": " + what + " is NULL");
}

// Copies a string for dti_string_free.
char* copy_string(const std::string& s) {
  char* out = static_cast<char*>(::operator new(s.size() + 1));
  std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return out;
}

dti_status check_size(const char* function, const char* type, std::uint32_t got, std::size_t want) {
  if (got != want) {
    return set_error(DTI_INVALID_ARGUMENT, std::string(function) + ": " + type +
                                               ".struct_size is " + std::to_string(got) +
                                               ", expected " + std::to_string(want) +
                                               " (initialize it with " + type + "_default())");
  }
  return DTI_OK;
}

dti_status to_session_options(const dti_session_options& in, SessionOptions* out,
                              RecordLevel* level) {
  if (dti_status s = check_size("dti_session_open", "dti_session_options", in.struct_size,
                                sizeof(dti_session_options));
      s != DTI_OK) {
    return s;
  }
  if (in.mode != DTI_MODE_CANONICAL && in.mode != DTI_MODE_FAST) {
    return set_error(DTI_INVALID_ARGUMENT,
                     "dti_session_open: dti_session_options.mode must be "
                     "0 (canonical) or 1 (fast), got " +
                         std::to_string(in.mode));
  }
  if (in.log_level < -1 || in.log_level > static_cast<int>(LogLevel::kOff)) {
    return set_error(DTI_INVALID_ARGUMENT,
                     "dti_session_open: dti_session_options.log_level must be in [-1, 6], got " +
                         std::to_string(in.log_level));
  }
  if (in.fingerprint_level < 0 || in.fingerprint_level > 2) {
    return set_error(DTI_INVALID_ARGUMENT,
                     "dti_session_open: dti_session_options.fingerprint_level must be 0 (off), "
                     "1 (final) or 2 (steps), got " +
                         std::to_string(in.fingerprint_level));
  }
  *level = static_cast<RecordLevel>(in.fingerprint_level);
  // The session's own recorder fills GenerationResult::fingerprint_json (in memory).
  out->recorder.level = *level;
  out->mode = in.mode == DTI_MODE_FAST ? NumericsMode::kFast : NumericsMode::kCanonical;
  out->threads = in.threads;
  out->kv_budget_bytes = in.kv_budget_bytes;
  out->kv_block_size = in.kv_block_size;
  out->max_batch = in.max_batch;
  out->prefill_chunk_tokens = in.prefill_chunk_tokens;
  out->max_queue = in.max_queue;
  if (in.log_level >= 0) out->log_level = static_cast<LogLevel>(in.log_level);
  return DTI_OK;
}

dti_status to_generation_config(const char* function, const dti_generation_config* in,
                                GenerationConfig* out) {
  if (in == nullptr) return DTI_OK;  // defaults
  if (dti_status s = check_size(function, "dti_generation_config", in->struct_size,
                                sizeof(dti_generation_config));
      s != DTI_OK) {
    return s;
  }
  // Scalars share their names with GenerationConfig's members (core/generation_fields.h).
#define DETINFER_COPY_FIELD(member, ...) \
  out->member = static_cast<decltype(out->member)>(in->member);
  DETINFER_GENERATION_SCALAR_FIELDS(DETINFER_COPY_FIELD)
#undef DETINFER_COPY_FIELD
  if (in->has_seed != 0) out->seed = in->seed;
  if (in->stop_token_ids != nullptr) {
    out->stop_token_ids.emplace(in->stop_token_ids, in->stop_token_ids + in->num_stop_token_ids);
  } else if (in->num_stop_token_ids != 0) {
    return set_error(DTI_INVALID_ARGUMENT, std::string(function) +
                                               ": stop_token_ids is NULL but num_stop_token_ids "
                                               "is " +
                                               std::to_string(in->num_stop_token_ids));
  }
  if (in->num_stop_strings != 0 && in->stop_strings == nullptr) {
    return null_argument(function, "stop_strings");
  }
  for (std::size_t i = 0; i < in->num_stop_strings; ++i) {
    if (in->stop_strings[i] == nullptr) {
      return set_error(DTI_INVALID_ARGUMENT,
                       std::string(function) + ": stop_strings[" + std::to_string(i) + "] is NULL");
    }
    out->stop_strings.emplace_back(in->stop_strings[i]);
  }
  return DTI_OK;
}

TokenCallback to_callback(dti_token_callback cb, void* user_data) {
  if (cb == nullptr) return {};
  return [cb, user_data](const TokenEvent& e) {
    return cb(user_data, e.token, e.text.c_str(), e.text.size(), e.sample_index, e.step) != 0;
  };
}

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

const char* dti_last_error(void) { return detinfer::capi::last_error.c_str(); }

const char* dti_version(void) { return DETINFER_VERSION_STRING; }

dti_session_options dti_session_options_default(void) {
  const detinfer::SessionOptions d;
  dti_session_options o{};
  o.struct_size = sizeof(dti_session_options);
  o.mode = DTI_MODE_CANONICAL;
  o.threads = d.threads;
  o.kv_budget_bytes = d.kv_budget_bytes;
  o.kv_block_size = d.kv_block_size;
  o.max_batch = d.max_batch;
  o.prefill_chunk_tokens = d.prefill_chunk_tokens;
  o.max_queue = d.max_queue;
  o.log_level = -1;
  o.fingerprint_level = 0;
  return o;
}

dti_generation_config dti_generation_config_default(void) {
  const detinfer::GenerationConfig d;
  dti_generation_config c{};
  c.struct_size = sizeof(dti_generation_config);
#define DETINFER_COPY_FIELD(member, ...) c.member = static_cast<decltype(c.member)>(d.member);
  DETINFER_GENERATION_SCALAR_FIELDS(DETINFER_COPY_FIELD)
#undef DETINFER_COPY_FIELD
  c.has_seed = 0;
  c.seed = 0;
  return c;
}

dti_status dti_session_open(const char* model_dir, const dti_session_options* options,
                            dti_session** out) {
  const char* fn = "dti_session_open";
  if (out == nullptr) return null_argument(fn, "out");
  *out = nullptr;
  if (model_dir == nullptr) return null_argument(fn, "model_dir");
  return guarded(fn, [&] {
    detinfer::SessionOptions so;
    detinfer::RecordLevel level = detinfer::RecordLevel::kOff;
    const dti_session_options defaults = dti_session_options_default();
    if (dti_status s =
            detinfer::capi::to_session_options(options ? *options : defaults, &so, &level);
        s != DTI_OK) {
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
  if (out == nullptr) return null_argument(fn, "out");
  *out = nullptr;
  if (session == nullptr) return null_argument(fn, "session");
  if (prompt == nullptr) return null_argument(fn, "prompt");
  return guarded(fn, [&] {
    return detinfer::capi::generate(fn, session, detinfer::Prompt(std::string(prompt)), config,
                                    on_token, user_data, out);
  });
}

dti_status dti_generate_tokens(dti_session* session, const int32_t* prompt_tokens,
                               size_t num_prompt_tokens, const dti_generation_config* config,
                               dti_token_callback on_token, void* user_data, dti_result** out) {
  const char* fn = "dti_generate_tokens";
  if (out == nullptr) return null_argument(fn, "out");
  *out = nullptr;
  if (session == nullptr) return null_argument(fn, "session");
  if (prompt_tokens == nullptr && num_prompt_tokens != 0) return null_argument(fn, "prompt_tokens");
  return guarded(fn, [&] {
    std::vector<std::int32_t> ids(prompt_tokens, prompt_tokens + num_prompt_tokens);
    return detinfer::capi::generate(fn, session, detinfer::Prompt(std::move(ids)), config, on_token,
                                    user_data, out);
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

void dti_result_free(dti_result* result) { delete result; }

}  // extern "C"
