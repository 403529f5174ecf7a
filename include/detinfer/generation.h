// What to generate (GenerationConfig) and what came out (GenerationResult).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "detinfer/export.h"

namespace detinfer {

// What the output must be (docs/structured.md). kJsonObject: any JSON object; kJsonSchema:
// a JSON value valid against `json_schema` (a JSON Schema text, the supported subset).
// Constrained decoding masks every token that cannot continue the structure; a sequence
// ends (FinishReason::kStop) when the structure is complete.
enum class ResponseFormatType : std::uint8_t {
  kText = 0,
  kJsonObject = 1,
  kJsonSchema = 2,
};
DETINFER_API const char* to_string(ResponseFormatType t);  // "text", "json_object", ...

struct ResponseFormat {
  ResponseFormatType type = ResponseFormatType::kText;
  std::string json_schema;  // the schema's JSON text; used only with kJsonSchema
  bool operator==(const ResponseFormat& o) const {
    return type == o.type && json_schema == o.json_schema;
  }
  bool operator!=(const ResponseFormat& o) const { return !(*this == o); }
};

struct GenerationConfig {
  std::int32_t max_new_tokens = 64;       // 1..context length
  float temperature = 0.0f;               // 0 = greedy; otherwise (0, 100]
  std::int32_t top_k = 0;                 // 0 = off; else 1..vocab
  float top_p = 1.0f;                     // (0, 1]; 1 = off
  float min_p = 0.0f;                     // [0, 1); 0 = off
  float repetition_penalty = 1.0f;        // (0, 10]; 1 = off (Hugging Face semantics)
  float presence_penalty = 0.0f;          // [-2, 2] (OpenAI semantics)
  float frequency_penalty = 0.0f;         // [-2, 2] (OpenAI semantics)
  std::optional<std::uint64_t> seed;      // absent: the session draws one and reports it
  std::int32_t num_return_sequences = 1;  // n: 1..64
  // Philox stream of sample 0; sample i uses stream first_sample_index + i, so sample i
  // of an n-sample request equals the same request with n = 1 and this set to i.
  std::uint32_t first_sample_index = 0;
  std::int32_t num_beams = 1;   // 1 = no beam search; 2..64
  float length_penalty = 1.0f;  // beam search score = logprob_sum / len^length_penalty
  bool early_stopping = false;  // beam search: stop when num_beams hypotheses are done
  // Stop token ids; when unset, the model's eos ids (generation_config.json/config.json).
  std::optional<std::vector<std::int32_t>> stop_token_ids;
  std::vector<std::string> stop_strings;  // matched on decoded text across tokens
  std::int32_t logprobs = 0;              // top-N logprobs per step: 0..20
  bool ignore_eos = false;                // generate max_new_tokens even past eos
  ResponseFormat response_format;         // text (unconstrained), JSON object or schema
  // Speculative decoding (docs/speculative.md), a pure speed knob: outputs, digests and
  // logprobs are bitwise those of plain decoding. draft_tokens > 0 turns on the
  // prompt-lookup (n-gram) drafter: each decode step proposes up to draft_tokens tokens
  // that followed the latest earlier occurrence of the text's last n tokens (n from
  // draft_ngram_max down to draft_ngram_min) and verifies them in one pass.
  std::int32_t draft_tokens = 0;     // 0 = off; 1..8
  std::int32_t draft_ngram_min = 1;  // 1..8, <= draft_ngram_max
  std::int32_t draft_ngram_max = 3;  // 1..8
  // With draft_tokens > 0: draft with the session's draft model
  // (SessionOptions::draft_model_path) instead of the n-gram drafter. Without a draft
  // model in the session the request is refused (field "draft_with_model").
  bool draft_with_model = false;
};

enum class FinishReason : std::uint8_t {
  kLength = 0,     // max_new_tokens reached
  kStop = 1,       // a stop token or stop string
  kCancelled = 2,  // the caller cancelled the request
};
DETINFER_API const char* to_string(FinishReason r);

struct TokenLogprob {
  std::int32_t token = 0;
  float logprob = 0.0f;
};

struct StepLogprobs {
  std::int32_t token = 0;         // the chosen token
  float logprob = 0.0f;           // its logprob under the processed distribution
  std::vector<TokenLogprob> top;  // top-N, sorted by logprob desc then token id asc
};

struct Timings {
  double queue_ms = 0;  // submission to admission
  double time_to_first_token_ms = 0;
  std::vector<double> token_ms;  // per generated token
  double total_ms = 0;
};

struct CacheUsage {
  std::int64_t prefix_cached_tokens = 0;  // prompt tokens served from the KV-prefix cache
  bool result_cache_hit = false;
};

struct Sequence {
  std::vector<std::int32_t> tokens;  // generated tokens (stop strings trimmed from text only)
  std::string text;
  FinishReason finish_reason = FinishReason::kLength;
  std::vector<StepLogprobs> logprobs;       // when GenerationConfig::logprobs > 0
  double score = 0;                         // beam search score; sum logprob otherwise
  std::uint64_t digest = 0;                 // chain digest over per-step logits digests
  std::vector<std::uint64_t> step_digests;  // XXH3-64 of each step's fp32 logits bits
};

struct GenerationResult {
  std::vector<std::int32_t> prompt_tokens;
  std::vector<Sequence> sequences;  // n samples or n best beams
  std::uint64_t seed = 0;           // the seed actually used
  Timings timings;
  CacheUsage cache;
  std::string fingerprint_json;  // the RunFingerprint, when a recorder is attached
  // This result's transcript (detinfer.transcript/1, Transcript::from_json): what
  // DeterministicSession::verify checks. Filled by the session for every request.
  std::string transcript_json;
};

// One generated token, as streamed to a TokenCallback.
struct TokenEvent {
  std::int32_t token = 0;
  // Text that became final with this token: may be empty (an incomplete UTF-8 sequence
  // or text that could still start a stop string is held back); the concatenation of
  // all pieces of a sample equals its Sequence::text.
  std::string text;
  const StepLogprobs* logprobs = nullptr;  // set when GenerationConfig::logprobs > 0
  std::int32_t sample_index = 0;           // which of the n samples (or returned beams)
  std::int32_t step = 0;                   // 0 for the first generated token
};

// Called for every generated token on the engine thread: keep it short. Returning false
// cancels the request (it finishes with FinishReason::kCancelled). Beam search calls it
// for the tokens of each returned beam once the search is over.
using TokenCallback = std::function<bool(const TokenEvent&)>;

}  // namespace detinfer
