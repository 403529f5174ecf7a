// DeterministicSession::verify: a generation's transcript verifies by one teacher-forced
// prefill (greedy and seeded sampling, several parameter mixes, n > 1, chunk sizes and
// thread counts other than the generating session's); a single flipped token, digest,
// seed or parameter is found at the step where the regenerated output first differs; a
// transcript of another model or numerics is refused.
#include <gtest/gtest.h>

#include "detinfer/error.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::tiny_model_dir;
using testing::tiny_options;

GenerationConfig mix(int which) {
  GenerationConfig c;
  c.max_new_tokens = 24;
  c.seed = 1000 + static_cast<std::uint64_t>(which);
  switch (which) {
    case 0:  // greedy
      break;
    case 1:
      c.temperature = 0.8f;
      c.top_p = 0.9f;
      break;
    case 2:
      c.temperature = 1.3f;
      c.top_k = 20;
      c.repetition_penalty = 1.3f;
      break;
    case 3:
      c.temperature = 1.0f;
      c.min_p = 0.05f;
      c.presence_penalty = 0.5f;
      c.frequency_penalty = 0.4f;
      c.num_return_sequences = 3;
      break;
    case 4:  // greedy with penalties, longer than two prefill chunks, past eos
      c.repetition_penalty = 1.2f;
      c.max_new_tokens = 80;
      c.ignore_eos = true;
      break;
    default:  // sampling with logprobs (they do not change the choice) and n = 2
      c.temperature = 0.7f;
      c.top_k = 50;
      c.top_p = 0.95f;
      c.logprobs = 3;
      c.num_return_sequences = 2;
      c.first_sample_index = 5;
      break;
  }
  return c;
}

std::vector<std::int32_t> prompt_of(int which) {
  std::vector<std::int32_t> p;
  const int len = which == 4 ? 70 : 1 + 9 * which;  // 1 token up to past a 32-token chunk
  for (int i = 0; i < len; ++i) p.push_back((37 * i + 11 * which + 5) % 500);
  return p;
}

Transcript transcript_for(DeterministicSession& s, int which) {
  const GenerationResult r = s.generate(Prompt(prompt_of(which)), mix(which));
  EXPECT_FALSE(r.transcript_json.empty());
  return Transcript::from_json(r.transcript_json);
}

struct VerifyTest : ::testing::Test {
  static DeterministicSession& session() {
    static DeterministicSession s = DeterministicSession::open(tiny_model_dir(), tiny_options());
    return s;
  }
};

TEST_F(VerifyTest, RoundTripVerifiesForEveryParameterMix) {
  // The verifying session prefills in other chunks on other threads.
  SessionOptions o = tiny_options(2);
  o.prefill_chunk_tokens = 7;
  DeterministicSession other = DeterministicSession::open(tiny_model_dir(), o);
  for (int which = 0; which < 6; ++which) {
    const Transcript t = transcript_for(session(), which);
    ASSERT_EQ(static_cast<std::int32_t>(t.samples.size()), mix(which).num_return_sequences);
    std::int64_t steps = 0;
    for (const auto& s : t.samples) steps += static_cast<std::int64_t>(s.tokens.size());
    const VerifyResult a = session().verify(t);
    EXPECT_TRUE(a.verified) << "mix " << which << ": " << a.message;
    EXPECT_EQ(a.steps_checked, steps) << "mix " << which;
    const VerifyResult b = other.verify(Transcript::from_json(t.to_json(2)));
    EXPECT_TRUE(b.verified) << "mix " << which << ": " << b.message;
  }
}

TEST_F(VerifyTest, ManyTranscriptsVerifyTogetherAndOnlyTheTamperedOneDiverges) {
  std::vector<Transcript> ts;
  for (int which = 0; which < 6; ++which) ts.push_back(transcript_for(session(), which));
  ts[2].samples[0].tokens[3] = (ts[2].samples[0].tokens[3] + 1) % 512;
  const std::vector<VerifyResult> rs = session().verify(ts);
  ASSERT_EQ(rs.size(), ts.size());
  for (std::size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(rs[i].verified, i != 2) << i << ": " << rs[i].message;
  }
  ASSERT_TRUE(rs[2].divergence);
  EXPECT_EQ(rs[2].divergence->step, 3);
  EXPECT_EQ(rs[2].divergence->recorded_token, ts[2].samples[0].tokens[3]);
  EXPECT_NE(rs[2].divergence->expected_token, rs[2].divergence->recorded_token);
}

// The step at which two outputs first differ (-1: none).
std::int32_t first_difference(const std::vector<std::int32_t>& a,
                              const std::vector<std::int32_t>& b) {
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i >= a.size() || i >= b.size() || a[i] != b[i]) return static_cast<std::int32_t>(i);
  }
  return -1;
}

TEST_F(VerifyTest, SingleFlippedTokenOrDigestIsFoundAtItsStep) {
  testing::TestRng rng{77, 1};
  for (int which = 0; which < 6; ++which) {
    const Transcript t = transcript_for(session(), which);
    for (int trial = 0; trial < 3; ++trial) {
      const auto k =
          static_cast<std::size_t>(rng.next(static_cast<std::uint32_t>(t.samples.size())));
      const TranscriptSample& s = t.samples[k];
      const auto step =
          static_cast<std::int32_t>(rng.next(static_cast<std::uint32_t>(s.tokens.size())));
      Transcript tok = t;
      tok.samples[k].tokens[step] =
          (s.tokens[step] + 1 + static_cast<std::int32_t>(rng.next(500))) % 512;
      const VerifyResult a = session().verify(tok);
      ASSERT_FALSE(a.verified) << which;
      EXPECT_EQ(a.divergence->sample, static_cast<std::int32_t>(k));
      EXPECT_EQ(a.divergence->step, step) << a.message;
      EXPECT_EQ(a.divergence->expected_token, s.tokens[step]) << a.message;
      Transcript dig = t;
      dig.samples[k].step_digests[step] ^= std::uint64_t{1} << rng.next(64);
      const VerifyResult b = session().verify(dig);
      ASSERT_FALSE(b.verified);
      EXPECT_EQ(b.divergence->step, step) << b.message;
      EXPECT_EQ(b.divergence->reason, "digest");
      EXPECT_EQ(b.divergence->expected_digest, s.step_digests[step]);
      Transcript chain = t;
      chain.samples[k].chain_digest ^= 1;
      const VerifyResult c = session().verify(chain);
      ASSERT_FALSE(c.verified);
      EXPECT_EQ(c.divergence->reason, "chain digest");
      EXPECT_EQ(c.divergence->step, static_cast<std::int32_t>(s.tokens.size()) - 1);
    }
  }
}

// A flipped seed or sampling parameter: the divergence is exactly where a generation
// with the flipped request first differs from the recorded output (none: verified).
TEST_F(VerifyTest, FlippedSeedOrParameterIsFoundWhereTheOutputsFirstDiffer) {
  testing::TestRng rng{78, 2};
  int diverged = 0;
  for (int which = 1; which < 6; ++which) {
    const Transcript t = transcript_for(session(), which);
    for (int field = 0; field < 5; ++field) {
      Transcript f = t;
      switch (field) {
        case 0:
          f.seed ^= 1 + rng.next(1000);
          break;
        case 1:
          f.config.temperature *= 1.5f;
          break;
        case 2:
          f.config.top_k = 2 + static_cast<std::int32_t>(rng.next(5));
          break;
        case 3:
          f.config.top_p = 0.5f;
          break;
        default:
          f.config.repetition_penalty = 1.9f;
          break;
      }
      GenerationConfig regen = f.config;
      regen.seed = f.seed;
      const GenerationResult r = session().generate(Prompt(f.prompt_tokens), regen);
      std::int32_t sample = -1, step = -1;
      for (std::size_t k = 0; k < f.samples.size() && sample < 0; ++k) {
        step = first_difference(f.samples[k].tokens, r.sequences[k].tokens);
        if (step >= 0) sample = static_cast<std::int32_t>(k);
      }
      const VerifyResult v = session().verify(f);
      if (sample < 0) {
        EXPECT_TRUE(v.verified) << which << "/" << field << ": " << v.message;
        continue;
      }
      ++diverged;
      ASSERT_FALSE(v.verified) << which << "/" << field;
      EXPECT_EQ(v.divergence->sample, sample) << v.message;
      EXPECT_EQ(v.divergence->step, step) << which << "/" << field << ": " << v.message;
    }
  }
  EXPECT_GT(diverged, 10);  // the flips do change outputs (the test can fail)
}

TEST_F(VerifyTest, AnotherModelOrNumericsIsRefusedNeverVerified) {
  const Transcript t = transcript_for(session(), 1);
  auto refused = [&](DeterministicSession& s, const Transcript& x, const std::string& field) {
    try {
      const VerifyResult r = s.verify(x);
      ADD_FAILURE() << field << ": not refused: " << r.message;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      EXPECT_EQ(e.field(), field) << e.what();
    }
  };
  devtools::TinyModelOptions mo;
  mo.out_dir = tiny_model_dir() + "-other";
  mo.seed = 7;  // the same shape, other weights
  devtools::make_tiny_model(mo);
  DeterministicSession other = DeterministicSession::open(mo.out_dir, tiny_options());
  refused(other, t, "model.fingerprint");
  Transcript x = t;
  x.numerics_spec += 1;
  refused(session(), x, "numerics.spec_version");
  x = t;
  x.weight_dtype = "bf16";
  refused(session(), x, "model.weight_dtype");
  x = t;
  x.kv_dtype = "bf16";
  refused(session(), x, "numerics.kv_dtype");
  x = t;
  x.numerics_mode = "fast";
  refused(session(), x, "numerics.mode");
  // A bf16-KV session verifies its own transcripts and refuses f32 ones.
  SessionOptions bo = tiny_options();
  bo.kv_dtype = KvDType::kBF16;
  DeterministicSession bf = DeterministicSession::open(tiny_model_dir(), bo);
  const Transcript b = transcript_for(bf, 2);
  EXPECT_TRUE(bf.verify(b).verified);
  refused(bf, t, "numerics.kv_dtype");
  refused(session(), b, "numerics.kv_dtype");
  // Quantized weights: the transcript records them (and its JSON round-trips them); a
  // q8_0 session verifies its own and refuses native ones, and the reverse.
  SessionOptions qo = tiny_options();
  qo.weights = "q8_0";
  DeterministicSession q8 = DeterministicSession::open(tiny_model_dir(), qo);
  const Transcript q = transcript_for(q8, 3);
  EXPECT_EQ(q.weight_format, "q8_0/qspec1");
  EXPECT_EQ(Transcript::from_json(q.to_json()).weight_format, "q8_0/qspec1");
  EXPECT_TRUE(t.weight_format.empty());
  EXPECT_EQ(t.to_json().find("weight_format"), std::string::npos);  // native: no new key
  EXPECT_TRUE(q8.verify(q).verified);
  refused(q8, t, "numerics.weight_format");
  refused(session(), q, "numerics.weight_format");
}

TEST_F(VerifyTest, StructuralLiesAreDivergences) {
  GenerationConfig c = mix(0);
  c.max_new_tokens = 8;
  c.ignore_eos = true;
  Transcript t = Transcript::from_json(session().generate(Prompt(prompt_of(2)), c).transcript_json);
  ASSERT_TRUE(session().verify(t).verified);
  Transcript x = t;
  x.samples[0].finish_reason = FinishReason::kStop;  // no stop token, no stop strings
  VerifyResult r = session().verify(x);
  ASSERT_FALSE(r.verified);
  EXPECT_EQ(r.divergence->reason, "finish reason");
  x = t;
  x.config.max_new_tokens = 5;  // the recorded output is longer than the request allows
  r = session().verify(x);
  ASSERT_FALSE(r.verified);
  EXPECT_EQ(r.divergence->step, 5);
  x = t;
  x.config.ignore_eos = false;
  x.config.stop_token_ids = std::vector<std::int32_t>{t.samples[0].tokens[2]};
  r = session().verify(x);  // generation would have stopped at step 2 (or diverged earlier)
  ASSERT_FALSE(r.verified);
  EXPECT_LE(r.divergence->step, 3);
}

// Transcripts that parse but cannot be valid for this model: clear kInvalidArgument.
TEST_F(VerifyTest, InvalidForThisModelIsInvalidArgument) {
  const Transcript t = transcript_for(session(), 1);
  auto invalid = [&](const Transcript& x, const std::string& what) {
    try {
      session().verify(x);
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << what << ": " << e.what();
    }
  };
  Transcript x = t;
  x.samples[0].tokens[0] = 100000;  // outside the 512-token vocabulary
  invalid(x, "output id");
  x = t;
  x.prompt_tokens[0] = 512;
  invalid(x, "prompt id");
  x = t;
  x.prompt_tokens.assign(5000, 1);  // longer than the 2048-token context
  invalid(x, "prompt length");
  x = t;
  x.prompt_tokens.clear();
  invalid(x, "empty prompt");
  x = t;
  x.config.max_new_tokens = 1 << 20;
  invalid(x, "max_new_tokens");
  x = t;
  x.config.temperature = -1;
  invalid(x, "temperature");
  x = t;
  x.config.num_beams = 2;
  try {
    session().verify(x);
    ADD_FAILURE() << "beam transcript accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
  }
}

}  // namespace
}  // namespace detinfer
