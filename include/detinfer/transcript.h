// Transcript: a generation's checkable receipt — the model and numerics it ran with, the
// prompt ids, the normalized generation parameters, the seed, every sample's output ids
// and the per-step digest chain (docs/fingerprint.md, "Transcripts and verification";
// format ids "detinfer.transcript/1" and, with the conversation of a chat,
// "detinfer.transcript/2"). DeterministicSession::verify checks one by a teacher-forced
// prefill instead of regenerating it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "detinfer/export.h"
#include "detinfer/generation.h"
#include "detinfer/hash.h"

namespace detinfer {

// The format ids this build writes and reads: /1 for a prompt, /2 for a chat (/1 plus the
// conversation the prompt was rendered from).
inline constexpr const char kTranscriptFormat[] = "detinfer.transcript/1";
inline constexpr const char kChatTranscriptFormat[] = "detinfer.transcript/2";

// One returned sample: what it generated and the digests of its steps.
struct DETINFER_API TranscriptSample {
  std::vector<std::int32_t> tokens;
  std::vector<std::uint64_t> step_digests;  // logits_digest of each step, one per token
  std::uint64_t chain_digest = 0;           // chain_digest(step_digests): Sequence::digest
  FinishReason finish_reason = FinishReason::kLength;
};

// The conversation a chat's prompt ids were rendered from (the messages form of a
// transcript): verify renders it with the session's chat template and checks that it
// gives the recorded prompt ids (or uses them when the transcript leaves them out).
struct DETINFER_API TranscriptChat {
  std::string messages_json;  // a JSON array of OpenAI-shaped messages (chat_messages_to_json)
  bool add_generation_prompt = true;
  std::string tools_json;             // "" = no tools
  std::string extra_variables_json;   // "" = none (ChatTemplateOptions::extra_variables_json)
  std::string template_name;          // "" = the model's choice
  std::int64_t now_unix_seconds = 0;  // the time strftime_now() rendered
  // Text encoded (without special tokens) after the rendering and appended to the prompt:
  // the opening of a tool call a server forced; "" = none.
  std::string prompt_suffix;
};
// transcript_chat(messages, options) (detinfer/session.h) makes one of a conversation.

struct DETINFER_API Transcript {
  // What the output depends on besides the request: verification refuses another one.
  Hash128 model_fingerprint;       // docs/fingerprint-model.md
  std::string weight_dtype;        // "f32" | "bf16" | "f16"
  std::string numerics_mode;       // "canonical" (the only mode that can be verified)
  std::int32_t numerics_spec = 0;  // numerics spec version
  std::string kv_dtype = "f32";    // KV storage: "f32" | "bf16" | "f16"
  // Quantized weights ("q8_0/qspec1": SessionOptions::weights or a GGUF file's quantized
  // tensors); "" for weights as stored (then absent from the JSON).
  std::string weight_format;
  Hash128 tokenizer_hash;  // informational (ids are what is verified); 0 = none
  // The prompt ids. A chat transcript may leave them out (empty): verify then uses what its
  // conversation renders to.
  std::vector<std::int32_t> prompt_tokens;
  std::optional<TranscriptChat> chat;     // set: a chat transcript (format /2)
  GenerationConfig config;                // normalized (stop_token_ids resolved); `seed` unset here
  std::uint64_t seed = 0;                 // the seed actually used
  std::vector<TranscriptSample> samples;  // config.num_return_sequences of them

  // One JSON object (indent < 0: one line); format /2 when `chat` is set, else /1.
  std::string to_json(int indent = -1) const;
  // Strict: Error(kInvalidArgument) naming the field for malformed JSON (invalid UTF-8,
  // nesting deeper than 16, over 16 MiB), a missing, unknown or mistyped field, a value
  // out of range, lists of mismatched lengths (tokens vs step_digests; 1 to n samples, n =
  // num_return_sequences) or more than 1048576 ids in a list; Error(kUnsupported) for
  // another format id. Format /2 requires `chat` (its JSON texts are read by verify) and
  // may leave out prompt_tokens; /1 allows neither. A chain digest that does not cover its
  // step digests is not an error here: verify reports it as a divergence.
  static Transcript from_json(std::string_view json);
};

struct RunFingerprint;
// The transcript of a recorded run (its prompt ids must be recorded, else
// Error(kInvalidArgument)). Sessions fill GenerationResult::transcript_json with it.
DETINFER_API Transcript transcript_of(const RunFingerprint& fingerprint);

// Where a transcript first disagrees with the recomputation.
struct DETINFER_API VerifyDivergence {
  std::int32_t sample = 0;           // index into Transcript::samples
  std::int32_t step = 0;             // 0 = the first generated token
  std::int32_t expected_token = -1;  // the token the model chooses there (-1: none, the
                                     // sequence should have ended before this step)
  std::int32_t recorded_token = -1;
  std::uint64_t expected_digest = 0;  // logits_digest recomputed at this step (0: none)
  std::uint64_t recorded_digest = 0;
  std::string reason;  // "token", "digest", "token and digest", "chain digest",
                       // "continues after a stop token", "finish reason", "prompt"
  // reason "prompt" (a chat transcript whose conversation does not render to its prompt
  // ids): `step` is the index of the first prompt id that differs, expected_token the
  // rendering's id there and recorded_token the transcript's (-1 past either's end); the
  // digests are 0 and nothing was recomputed.
};

struct DETINFER_API VerifyResult {
  bool verified = false;
  std::optional<VerifyDivergence> divergence;  // set when not verified
  std::int64_t steps_checked = 0;              // recomputed steps, all samples
  std::string message;                         // one line for people
};

}  // namespace detinfer
