// Bytes of the result cache: the canonical form of a GenerationConfig (part of the key)
// and the serialized GenerationResult (the value). Floats are stored as their bit
// patterns, so a served result is bitwise the one that was computed.
#pragma once

#include <string>
#include <string_view>

#include "cache/block_store.h"
#include "detinfer/generation.h"

namespace detinfer::cache {

// Canonical bytes of a normalized config (the session resolves the seed and the default
// stop ids first). Stop ids and stop strings are sets: sorted and deduplicated; -0.0 is
// written as 0.0. Throws Error(kInvalidArgument) when the seed is unset, because a
// result drawn with an unknown seed must never be cached or served.
std::string canonical_generation_config(const GenerationConfig& config);

// The cached part of a result: prompt tokens, seed and the sequences (tokens, text, finish
// reason, logprobs, score, digests). Timings, cache usage and fingerprint_json describe a
// particular run and are not stored.
Bytes serialize_result(const GenerationResult& result);
// Throws Error(kCorrupt) on malformed bytes.
GenerationResult deserialize_result(const Bytes& bytes);

struct ResultComparison {
  bool equal = true;
  std::string first_difference;  // empty when equal, e.g. "sequence 0: token 5 differs"
};
// Bitwise comparison of the cached parts of two results (see serialize_result).
ResultComparison compare_results(const GenerationResult& expected, const GenerationResult& actual);

}  // namespace detinfer::cache
