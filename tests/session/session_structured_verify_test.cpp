// Verifying constrained transcripts (a JSON response_format, docs/fingerprint.md): the
// recomputed choice applies the token mask decoding applied, so greedy and sampled JSON
// outputs verify; a changed token inside the value, and a token after the value is
// complete, are divergences at their steps.
#include <gtest/gtest.h>

#include "detinfer/error.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::tiny_model_dir;
using testing::tiny_options;

GenerationConfig constrained(float temperature, std::int32_t n, std::int32_t max_new_tokens) {
  GenerationConfig c;
  c.max_new_tokens = max_new_tokens;
  c.temperature = temperature;
  c.seed = 31;
  c.num_return_sequences = n;
  c.response_format.type = ResponseFormatType::kJsonSchema;
  c.response_format.json_schema = R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 6}, "n": {"type": "integer"},
      "ok": {"type": "boolean"}}, "required": ["name", "n", "ok"],
      "additionalProperties": false})";
  return c;
}

DeterministicSession& session() {
  static DeterministicSession s = DeterministicSession::open(tiny_model_dir(), tiny_options());
  return s;
}

TEST(StructuredVerify, ConstrainedTranscriptsVerify) {
  for (const GenerationConfig& c :
       {constrained(0.0f, 1, 120), constrained(1.0f, 2, 120), constrained(0.9f, 1, 9)}) {
    const GenerationResult r = session().generate(Prompt("Give me JSON"), c);
    if (c.max_new_tokens == 120) {  // complete: ends with the value, finish reason stop
      ASSERT_EQ(r.sequences[0].finish_reason, FinishReason::kStop) << r.sequences[0].text;
    }
    const VerifyResult v = session().verify(Transcript::from_json(r.transcript_json));
    EXPECT_TRUE(v.verified) << v.message;
    std::int64_t steps = 0;
    for (const Sequence& s : r.sequences) steps += static_cast<std::int64_t>(s.tokens.size());
    EXPECT_EQ(v.steps_checked, steps);
  }
}

TEST(StructuredVerify, ChangedOrAppendedTokensAreDivergences) {
  const GenerationResult r = session().generate(Prompt("Give me JSON"), constrained(0.0f, 1, 120));
  const Transcript t = Transcript::from_json(r.transcript_json);
  const auto n = static_cast<std::int32_t>(t.samples[0].tokens.size());
  ASSERT_GT(n, 4);
  // A token the mask forbids (the greedy choice without the mask is another one).
  Transcript changed = t;
  changed.samples[0].tokens[2] = (changed.samples[0].tokens[2] + 1) % 256;
  const VerifyResult c = session().verify(changed);
  ASSERT_FALSE(c.verified);
  EXPECT_EQ(c.divergence->step, 2);
  EXPECT_EQ(c.divergence->expected_token, t.samples[0].tokens[2]);
  // One more token after the complete value (digests kept consistent).
  Transcript longer = t;
  longer.samples[0].tokens.push_back(t.samples[0].tokens[0]);
  longer.samples[0].step_digests.push_back(t.samples[0].step_digests[0]);
  longer.samples[0].chain_digest = chain_digest(longer.samples[0].step_digests);
  const VerifyResult l = session().verify(longer);
  ASSERT_FALSE(l.verified);
  EXPECT_EQ(l.divergence->step, n);
  EXPECT_EQ(l.divergence->reason, "continues after the structured output is complete");
}

}  // namespace
}  // namespace detinfer
