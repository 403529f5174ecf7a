// diff(a, b): which groups of two run fingerprints differ and where their outputs
// diverge (docs/fingerprint.md, "Diff").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "detinfer/export.h"
#include "detinfer/fingerprint.h"

namespace detinfer {

// The groups a diff reports, in report order. Inputs (what was asked) come first, then
// how it ran; cache usage is never compared.
enum class FingerprintGroup : std::uint8_t {
  kModel = 0,
  kTokenizer = 1,
  kPrompt = 2,
  kConfig = 3,
  kSeed = 4,
  kNumerics = 5,
  kLibrary = 6,
  kDevice = 7,
  kEnvironment = 8,
};
DETINFER_API const char* to_string(FingerprintGroup g);
// Model, tokenizer, prompt, config and seed: a difference there means a different
// request, not a reproducibility failure.
DETINFER_API bool is_input_group(FingerprintGroup g);

struct DETINFER_API GroupDifference {
  FingerprintGroup group;
  // "field: a-value vs b-value", one per differing field (values abbreviated).
  std::vector<std::string> fields;
};

struct DETINFER_API TokenLogit {
  std::int32_t token = 0;
  float logit = 0.0f;
};

// Where the outputs first diverge: the lowest step of any sequence (ties: lowest
// sequence index) at which the step digests or the tokens differ.
struct DETINFER_API StepDivergence {
  std::int64_t sequence = 0;
  // Step index (0 = first generated token). -1 when only the chain digests were
  // recorded and the tokens agree: the step cannot be located.
  std::int64_t step = 0;
  std::optional<std::int32_t> token_a;  // absent when that side has no such step
  std::optional<std::int32_t> token_b;
  std::optional<std::uint64_t> digest_a;  // step digests, when recorded
  std::optional<std::uint64_t> digest_b;
  // Top-5 logits at that step (logit desc, token id asc), when both sides have logits.
  std::vector<TokenLogit> top_a;
  std::vector<TokenLogit> top_b;
  std::string reason;  // e.g. "step digest differs", "sequence a ended (stop)"
};

struct DETINFER_API FingerprintDiff {
  std::vector<GroupDifference> groups;       // groups that differ, in enum order
  bool outputs_identical = true;             // same_output(a, b)
  std::optional<StepDivergence> divergence;  // when outputs differ and can be located
  std::string output_note;                   // e.g. sequence counts differ; empty when identical

  // Every group equal and the same output.
  bool identical() const { return groups.empty() && outputs_identical; }
  // No input group differs and the outputs are identical: the same request reproduced
  // (it may have run elsewhere: library, device, environment, thread count).
  bool reproduced() const;
  bool differs(FingerprintGroup g) const;

  // A human-readable report (several lines) and a JSON object.
  std::string to_text() const;
  std::string to_json(int indent = 2) const;
};

DETINFER_API FingerprintDiff diff(const RunFingerprint& a, const RunFingerprint& b);

// The k largest logits of a row, by value desc then token id asc; NaNs last.
DETINFER_API std::vector<TokenLogit> top_logits(const std::vector<float>& row, std::size_t k);

}  // namespace detinfer
