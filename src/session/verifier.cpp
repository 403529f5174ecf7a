#include "session/verifier.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>

#include "core/check.h"
#include "decode/json_schema.h"
#include "decode/logits_processor.h"
#include "decode/sampler.h"
#include "engine/structured_masks.h"

namespace detinfer::session {

namespace {
// One sample's teacher-forced check: the engine calls step() for every generated
// position in order, with the raw logits row the decode step computed there.
struct SampleCheck {
  const Transcript* transcript = nullptr;
  std::size_t transcript_index = 0;
  std::int32_t sample = 0;
  GenerationConfig config;  // normalized, logprobs off (they do not change the choice)
  std::int64_t vocab = 0;
  std::vector<std::int32_t> history;  // the recorded tokens before the current step
  std::int64_t checked = 0;
  std::optional<VerifyDivergence> divergence;
  decode::SamplingWorkspace sampling;  // reused by every step of this sample
  // Constrained decoding (a JSON response_format): the sample's JSON state, masked as the
  // output stage masks it; `complete` once the recorded text is a whole value.
  std::shared_ptr<const decode::JsonGrammar> grammar;
  std::optional<decode::JsonState> json;
  const decode::TokenTrie* trie = nullptr;
  std::vector<std::uint8_t> allowed;
  bool complete = false;
  // Steps prepared ahead (EngineRequest::score_prepare, in parallel): the digest, and the
  // choice when it does not depend on the earlier steps (no penalties, which read the
  // tokens before the step, and no JSON mask, which reads the state they advanced).
  struct Prepared {
    std::uint64_t digest = 0;
    std::int32_t token = 0;
    std::uint8_t ready = 0;  // 0 none, 1 the digest, 2 the digest and the token
  };
  std::vector<Prepared> pre;  // by step; each written by one prepare call only

  const TranscriptSample& recorded() const { return transcript->samples[sample]; }

  // Steps [step0, step0 + count), rows `vocab` floats apart; `ws` is this call's (one
  // range of one thread: the rows share its buffers, and no two threads share it).
  void prepare(std::int64_t step0, const float* rows, std::int64_t count) noexcept {
    decode::SamplingWorkspace ws;
    for (std::int64_t i = 0; i < count; ++i) prepare_one(step0 + i, rows + i * vocab, ws);
  }

  void prepare_one(std::int64_t step, const float* row, decode::SamplingWorkspace& ws) noexcept {
    const auto t = static_cast<std::size_t>(step);
    if (t >= pre.size()) return;
    Prepared& p = pre[t];
    try {
      p.digest = logits_digest(row, static_cast<std::size_t>(vocab));
      p.ready = 1;
      if (grammar || decode::has_penalties(config)) return;
      static const std::vector<std::int32_t> kUnread;  // no penalty reads the history
      p.token = decode::choose_token(config, row, vocab, transcript->prompt_tokens, kUnread,
                                     transcript->seed, static_cast<std::uint32_t>(sample),
                                     static_cast<std::uint64_t>(step), ws, nullptr,
                                     decode::LogprobNeed::kSkip)
                    .token;
      p.ready = 2;
    } catch (...) {  // step() recomputes it on the engine thread, where the error surfaces
    }
  }

  const std::vector<std::uint8_t>* mask() {
    if (!json) return nullptr;
    engine::structured_mask(*trie, *json, config, vocab, allowed);
    return &allowed;
  }

  bool step(std::int64_t step, const float* row) {
    const auto t = static_cast<std::size_t>(step);
    const TranscriptSample& s = recorded();
    const Prepared p = t < pre.size() ? pre[t] : Prepared{};
    const std::uint64_t digest =
        p.ready >= 1 ? p.digest : logits_digest(row, static_cast<std::size_t>(vocab));
    if (complete) {  // generation ends with the value: nothing follows it
      divergence = VerifyDivergence{sample,
                                    static_cast<std::int32_t>(step),
                                    -1,
                                    s.tokens[t],
                                    digest,
                                    s.step_digests[t],
                                    "continues after the structured output is complete"};
      return false;
    }
    decode::TokenChoice c;
    if (p.ready == 2) {
      c.token = p.token;
    } else {
      c = decode::choose_token(config, row, vocab, transcript->prompt_tokens, history,
                               transcript->seed, static_cast<std::uint32_t>(sample),
                               static_cast<std::uint64_t>(step), sampling, mask(),
                               decode::LogprobNeed::kSkip);
    }
    ++checked;
    const bool token_ok = c.token == s.tokens[t];
    const bool digest_ok = digest == s.step_digests[t];
    if (token_ok && digest_ok) {
      history.push_back(s.tokens[t]);
      if (json && !engine::is_stop_token(config, s.tokens[t])) {
        const bool ok = json->advance(trie->piece(s.tokens[t]));
        DETINFER_INTERNAL_CHECK(ok);  // the mask allowed it
        complete = json->done();
      }
      return true;
    }
    divergence = VerifyDivergence{sample,
                                  static_cast<std::int32_t>(step),
                                  c.token,
                                  s.tokens[t],
                                  digest,
                                  s.step_digests[t],
                                  !token_ok && !digest_ok ? "token and digest"
                                  : !token_ok             ? "token"
                                                          : "digest"};
    return false;
  }
};

using engine::is_stop_token;

// What the recorded ids and digests say on their own, without a forward pass: the
// earliest step where the sequence breaks the request's rules, if any.
// `complete`: the recorded text became a whole JSON value at the last step (a constrained
// sample ends there, finish reason stop).
std::optional<VerifyDivergence> structural(const GenerationConfig& c, const TranscriptSample& s,
                                           std::int32_t sample, bool complete) {
  const auto n = static_cast<std::int32_t>(s.tokens.size());
  auto at = [&](std::int32_t step, const char* reason) {
    VerifyDivergence d;
    d.sample = sample;
    d.step = step;
    if (step < n) {
      d.recorded_token = s.tokens[step];
      d.recorded_digest = s.step_digests[step];
    }
    d.reason = reason;
    return d;
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) {
    if (is_stop_token(c, s.tokens[i])) return at(i + 1, "continues after a stop token");
  }
  if (n > c.max_new_tokens) return at(c.max_new_tokens, "continues past max_new_tokens");
  const std::int32_t last = std::max(n - 1, 0);
  const bool ends_on_stop = n > 0 && is_stop_token(c, s.tokens[n - 1]);
  bool reason_ok = true;
  switch (s.finish_reason) {
    case FinishReason::kLength:
      reason_ok = n == c.max_new_tokens && !ends_on_stop;
      break;
    case FinishReason::kStop:
      reason_ok = ends_on_stop || complete || !c.stop_strings.empty();
      break;
    case FinishReason::kCancelled:
      break;
  }
  if (!reason_ok) return at(last, "finish reason");
  if (chain_digest(s.step_digests) != s.chain_digest) return at(last, "chain digest");
  return std::nullopt;
}

void check_identity(const Transcript& t, const RunFingerprint& base, std::size_t index) {
  const std::string where = "transcript " + std::to_string(index) + ": ";
  auto refuse = [&](const std::string& what, const std::string& got, const std::string& have,
                    const char* field) {
    throw Error(ErrorCode::kInvalidArgument,
                where + "it was made with " + what + " " + got + ", this session has " + have +
                    "; only a session of the same model and numerics can verify it",
                field);
  };
  if (t.model_fingerprint != base.model.fingerprint) {
    refuse("model", t.model_fingerprint.hex(), base.model.fingerprint.hex(), "model.fingerprint");
  }
  if (t.weight_dtype != base.model.weight_dtype) {
    refuse("weight format", t.weight_dtype, base.model.weight_dtype, "model.weight_dtype");
  }
  if (t.numerics_mode != base.numerics.mode) {
    refuse("numerics mode", t.numerics_mode, base.numerics.mode, "numerics.mode");
  }
  if (t.numerics_spec != base.numerics.spec_version) {
    refuse("numerics spec", std::to_string(t.numerics_spec),
           std::to_string(base.numerics.spec_version), "numerics.spec_version");
  }
  if (t.kv_dtype != base.numerics.kv_dtype) {
    refuse("KV format", t.kv_dtype, base.numerics.kv_dtype, "numerics.kv_dtype");
  }
  if (t.weight_format != base.numerics.weight_format) {
    const auto shown = [](const std::string& f) { return f.empty() ? std::string("native") : f; };
    refuse("weights", shown(t.weight_format), shown(base.numerics.weight_format),
           "numerics.weight_format");
  }
  if (t.config.num_beams > 1) {
    throw Error(ErrorCode::kUnsupported,
                where + "beam search transcripts cannot be verified by teacher forcing",
                "config.num_beams");
  }
}

std::string describe(const VerifyDivergence& d) {
  return "sample " + std::to_string(d.sample) + ", step " + std::to_string(d.step) + " (" +
         d.reason + "): expected token " + std::to_string(d.expected_token) + " digest " +
         hex64(d.expected_digest) + ", recorded token " + std::to_string(d.recorded_token) +
         " digest " + hex64(d.recorded_digest);
}
// The teacher-forced request of sample k of transcript i, checked by `c` (no score_row
// when the sample has no step to recompute).
engine::EngineRequest sample_request(RequestPrep& prep, const Transcript& t, std::size_t i,
                                     std::size_t k, std::int64_t vocab,
                                     const std::function<const decode::TokenTrie*()>& trie,
                                     SampleCheck& c) {
  RequestPolicy policy;
  policy.use_caches = false;
  policy.observed = false;
  GenerationConfig config = t.config;
  config.seed = t.seed;
  engine::EngineRequest r = prep.prepare(Prompt(t.prompt_tokens), config, {}, policy);
  const TranscriptSample& s = t.samples[k];
  for (std::size_t j = 0; j < s.tokens.size(); ++j) {
    if (s.tokens[j] >= vocab) {
      throw Error(ErrorCode::kInvalidArgument,
                  str_cat("transcript ", i, ": samples[", k, "].tokens[", j, "] = ", s.tokens[j],
                          " is outside the vocabulary [0, ", vocab, ")"),
                  "samples.tokens");
    }
  }
  c.transcript = &t;
  c.transcript_index = i;
  c.sample = static_cast<std::int32_t>(k);
  c.config = r.config;
  c.config.logprobs = 0;
  c.vocab = vocab;
  c.grammar = decode::compile_response_format(c.config.response_format);
  if (c.grammar) {
    c.trie = trie();  // built at the first constrained transcript only
    if (c.trie == nullptr) {
      throw Error(ErrorCode::kInvalidArgument,
                  str_cat("transcript ", i,
                          ": config.response_format needs the model's tokenizer (this session "
                          "has none)"),
                  "config.response_format");
    }
    c.json.emplace(c.grammar.get());
  }
  // Steps past max_new_tokens are a structural break, never recomputed.
  const std::size_t limit =
      std::min<std::size_t>(s.tokens.size(), static_cast<std::size_t>(config.max_new_tokens));
  if (limit == 0) return engine::EngineRequest{};
  r.score_from = static_cast<std::int64_t>(t.prompt_tokens.size()) - 1;
  r.prompt.insert(r.prompt.end(), s.tokens.begin(), s.tokens.begin() + (limit - 1));
  r.config.num_return_sequences = 1;
  r.config.max_new_tokens = 1;
  r.config.logprobs = 0;
  c.pre.assign(limit, {});
  SampleCheck* raw = &c;
  r.score_row = [raw](std::int64_t step, const float* row) { return raw->step(step, row); };
  r.score_prepare = [raw](std::int64_t step, const float* rows, std::int64_t count) {
    raw->prepare(step, rows, count);
  };
  return r;
}

// Runs the requests in waves of at most `wave` (they batch together in the engine). Every
// submitted request is waited for before anything is thrown: the callbacks point into
// the caller's checks.
void run_waves(engine::Engine& engine, std::vector<engine::EngineRequest>& requests,
               std::size_t wave) {
  for (std::size_t begin = 0; begin < requests.size(); begin += wave) {
    const std::size_t end = std::min(requests.size(), begin + wave);
    std::vector<std::future<GenerationResult>> futures;
    std::exception_ptr error;
    for (std::size_t q = begin; q < end && !error; ++q) {
      if (!requests[q].score_row) continue;
      try {
        futures.push_back(engine.submit(std::move(requests[q])));
      } catch (...) {
        error = std::current_exception();
      }
    }
    for (auto& f : futures) {
      try {
        f.get();
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace

Verifier::Verifier(RequestPrep& prep, engine::Engine& engine, const RunFingerprint& base,
                   std::int64_t vocab, std::int32_t wave, const Tokenizer* tokenizer)
    : prep_(prep),
      engine_(engine),
      base_(base),
      vocab_(vocab),
      wave_(std::max(wave, 1)),
      tokenizer_(tokenizer) {}

const decode::TokenTrie* Verifier::trie() {
  if (tokenizer_ == nullptr) return nullptr;
  std::call_once(trie_once_, [this] {
    trie_ = std::make_unique<decode::TokenTrie>(engine::token_pieces(*tokenizer_, vocab_));
  });
  return trie_.get();
}

std::vector<VerifyResult> Verifier::verify(const std::vector<Transcript>& transcripts) {
  if (base_.numerics.mode != "canonical") {
    fail(ErrorCode::kUnsupported, "verification needs a canonical-mode session (this one is ",
         base_.numerics.mode, "): only canonical numerics make prefill and decode logits equal");
  }
  std::vector<std::unique_ptr<SampleCheck>> checks;
  std::vector<engine::EngineRequest> requests;
  for (std::size_t i = 0; i < transcripts.size(); ++i) {
    check_identity(transcripts[i], base_, i);
    for (std::size_t k = 0; k < transcripts[i].samples.size(); ++k) {
      checks.push_back(std::make_unique<SampleCheck>());
      requests.push_back(sample_request(
          prep_, transcripts[i], i, k, vocab_, [this] { return trie(); }, *checks.back()));
    }
  }
  run_waves(engine_, requests, static_cast<std::size_t>(wave_));
  std::vector<VerifyResult> results(transcripts.size());
  for (const auto& c : checks) {
    VerifyResult& r = results[c->transcript_index];
    r.steps_checked += c->checked;
    std::optional<VerifyDivergence> d = c->divergence;
    std::optional<VerifyDivergence> s =
        structural(c->config, c->recorded(), c->sample, c->complete);
    if (s && (!d || s->step < d->step)) d = s;
    if (d && !r.divergence) r.divergence = d;  // the first sample's first divergence
  }
  for (VerifyResult& r : results) {
    r.verified = !r.divergence;
    r.message = r.verified ? "verified: " + std::to_string(r.steps_checked) + " steps recomputed"
                           : "diverged at " + describe(*r.divergence);
  }
  return results;
}

}  // namespace detinfer::session
