// The one field table of GenerationConfig. Validation, the result-cache key, the
// fingerprint JSON (both ways), the fingerprint diff and the C API conversion all iterate
// it, so a field added to GenerationConfig and to this table reaches every one of them
// (and a test flips every field, tests/cache/result_key_fields_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "detinfer/generation.h"

namespace detinfer::core {

// Where a field's upper bound comes from when it is not a constant.
enum class ModelBound : std::uint8_t {
  kNone = 0,           // `hi` is the bound
  kVocabSize = 1,      // the model's vocabulary size (top_k; each stop token id is below it)
  kContextLength = 2,  // the model's context length (max_new_tokens)
};

struct FieldSpec {
  const char* key;  // the member's name: the JSON key in fingerprints and Error::field()
  // Numeric fields: the allowed range, [lo, hi] with either end open; lists: the largest
  // count in `hi`. Unused for the seed.
  double lo;
  double hi;
  bool lo_open;
  bool hi_open;
  ModelBound bound;  // replaces `hi` when not kNone
  // Part of the result-cache key and of fingerprints and transcripts; false only for
  // speed knobs that cannot change a bit of the output (speculative decoding).
  bool affects_output;
  const char* range;  // the range in words, for messages ("in (0, 1] (1 = off)")
};

// Limits that are not part of the model.
constexpr std::int32_t kMaxReturnSequences = 64;
constexpr std::int32_t kMaxBeams = 64;
constexpr std::int32_t kMaxLogprobs = 20;
constexpr std::size_t kMaxStopStrings = 16;
constexpr std::size_t kMaxStopStringBytes = 256;
constexpr std::size_t kMaxStopTokenIds = 64;
// The largest JSON Schema text of a response_format (docs/structured.md).
constexpr std::size_t kMaxJsonSchemaBytes = 64 * 1024;
// Speculative decoding (docs/speculative.md): tokens drafted per step, n-gram lengths.
constexpr std::int32_t kMaxDraftTokens = 8;
constexpr std::int32_t kMaxDraftNgram = 8;

constexpr double kU32Max = std::numeric_limits<std::uint32_t>::max();

// X(member, lo, hi, lo_open, hi_open, bound, affects_output, range) for every numeric or
// boolean member; the C API's struct has members of the same names, so it copies these
// by name. Arguments after `member` name things of namespace detinfer::core. In `range`,
// {} stands for the model's bound.
#define DETINFER_GENERATION_SCALAR_FIELDS(X)                                                   \
  X(max_new_tokens, 1, 0, false, false, ModelBound::kContextLength, true,                      \
    "in [1, {}] (the context length)")                                                         \
  X(temperature, 0, 100, false, false, ModelBound::kNone, true, "0 (greedy) or in (0, 100]")   \
  X(top_k, 0, 0, false, false, ModelBound::kVocabSize, true,                                   \
    "0 (off) or in [1, {}] (the vocabulary size)")                                             \
  X(top_p, 0, 1, true, false, ModelBound::kNone, true, "in (0, 1] (1 = off)")                  \
  X(min_p, 0, 1, false, true, ModelBound::kNone, true, "in [0, 1) (0 = off)")                  \
  X(repetition_penalty, 0, 10, true, false, ModelBound::kNone, true, "in (0, 10] (1 = off)")   \
  X(presence_penalty, -2, 2, false, false, ModelBound::kNone, true, "in [-2, 2]")              \
  X(frequency_penalty, -2, 2, false, false, ModelBound::kNone, true, "in [-2, 2]")             \
  X(num_return_sequences, 1, kMaxReturnSequences, false, false, ModelBound::kNone, true,       \
    "in [1, 64]")                                                                              \
  X(first_sample_index, 0, kU32Max, false, false, ModelBound::kNone, true, "in [0, 2^32 - 1]") \
  X(num_beams, 1, kMaxBeams, false, false, ModelBound::kNone, true, "in [1, 64]")              \
  X(length_penalty, -10, 10, false, false, ModelBound::kNone, true, "in [-10, 10]")            \
  X(early_stopping, 0, 1, false, false, ModelBound::kNone, true, "true or false")              \
  X(logprobs, 0, kMaxLogprobs, false, false, ModelBound::kNone, true, "in [0, 20]")            \
  X(ignore_eos, 0, 1, false, false, ModelBound::kNone, true, "true or false")                  \
  X(draft_tokens, 0, kMaxDraftTokens, false, false, ModelBound::kNone, false,                  \
    "0 (off) or in [1, 8]")                                                                    \
  X(draft_ngram_min, 1, kMaxDraftNgram, false, false, ModelBound::kNone, false,                \
    "in [1, 8], at most draft_ngram_max")                                                      \
  X(draft_ngram_max, 1, kMaxDraftNgram, false, false, ModelBound::kNone, false, "in [1, 8]")   \
  X(draft_with_model, 0, 1, false, false, ModelBound::kNone, false, "true or false")

// The members that are not plain scalars: an optional seed, an optional list of token ids
// (each below the vocabulary size), a list of strings (`hi` is the largest count) and the
// response format (`hi` is the largest schema text in bytes; the schema itself is checked
// by decode::compile_response_format).
#define DETINFER_GENERATION_OTHER_FIELDS(X)                                          \
  X(seed, 0, 0, false, false, ModelBound::kNone, true, "any 64-bit value")           \
  X(stop_token_ids, 0, kMaxStopTokenIds, false, false, ModelBound::kVocabSize, true, \
    "at most 64 ids in [0, {})")                                                     \
  X(stop_strings, 0, kMaxStopStrings, false, false, ModelBound::kNone, true,         \
    "at most 16 strings of 1..256 bytes")                                            \
  X(response_format, 0, kMaxJsonSchemaBytes, false, false, ModelBound::kNone, true,  \
    "text, json_object or json_schema with a schema of the supported subset")

// Calls visit(const FieldSpec&, member) for every member of GenerationConfig, in a fixed
// order (the order of the result-cache key). `Config` is GenerationConfig or const
// GenerationConfig; the member is passed by reference.
template <typename Config, typename Visit>
void for_each_field(Config& config, Visit&& visit) {
#define DETINFER_VISIT_FIELD(member, lo, hi, lo_open, hi_open, bound, affects, range) \
  visit(FieldSpec{#member, lo, hi, lo_open, hi_open, bound, affects, range}, config.member);
  DETINFER_GENERATION_SCALAR_FIELDS(DETINFER_VISIT_FIELD)
  DETINFER_GENERATION_OTHER_FIELDS(DETINFER_VISIT_FIELD)
#undef DETINFER_VISIT_FIELD
}

// The number of fields for_each_field visits.
#define DETINFER_COUNT_FIELD(...) +1
constexpr std::size_t kGenerationFieldCount =
    0 DETINFER_GENERATION_SCALAR_FIELDS(DETINFER_COUNT_FIELD)
        DETINFER_GENERATION_OTHER_FIELDS(DETINFER_COUNT_FIELD);
#undef DETINFER_COUNT_FIELD

// One help line per field, in for_each_field's order (command-line help, bindings' docs);
// the range in words comes from FieldSpec::range.
struct FieldDoc {
  const char* key;
  const char* doc;
};
constexpr FieldDoc kGenerationFieldDocs[] = {
    {"max_new_tokens", "Tokens to generate"},
    {"temperature", "Sampling temperature (0 = greedy)"},
    {"top_k", "Keep the k most likely tokens (0 = off)"},
    {"top_p", "Nucleus sampling: keep the most likely tokens up to this mass (1 = off)"},
    {"min_p", "Drop tokens below this fraction of the top probability (0 = off)"},
    {"repetition_penalty", "Penalty of tokens already in the prompt or output (1 = off)"},
    {"presence_penalty", "Subtracted from the logit of every token already generated"},
    {"frequency_penalty", "Subtracted once per earlier occurrence of a generated token"},
    {"num_return_sequences", "Samples (or best beams) to return"},
    {"first_sample_index", "Philox stream of the first sample (later samples follow)"},
    {"num_beams", "Beam search width (1 = off)"},
    {"length_penalty", "Beam search length penalty"},
    {"early_stopping", "Beam search stops when num_beams hypotheses are finished"},
    {"logprobs", "Top-N logprobs per step"},
    {"ignore_eos", "Generate max-new-tokens even past eos"},
    {"draft_tokens",
     "Speculative decoding: tokens the drafter (n-gram, or the draft model) proposes per step; "
     "outputs are unchanged (docs/speculative.md)"},
    {"draft_ngram_min", "Speculative decoding: the shortest n-gram the drafter matches"},
    {"draft_ngram_max", "Speculative decoding: the longest n-gram the drafter matches"},
    {"draft_with_model",
     "Speculative decoding: draft with the session's draft model instead of n-grams"},
    {"seed", "Sampling seed (default: drawn and reported)"},
    {"stop_token_ids", "Stop token ids instead of the model's eos ids"},
    {"stop_strings", "Stop string (repeatable)"},
    {"response_format",
     "Output format: text, json_object or json_schema (the schema from --json-schema FILE)"},
};
static_assert(sizeof(kGenerationFieldDocs) / sizeof(kGenerationFieldDocs[0]) ==
                  kGenerationFieldCount,
              "every GenerationConfig field needs its help line in kGenerationFieldDocs");

}  // namespace detinfer::core
