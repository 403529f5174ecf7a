// Transcript verification without regeneration (DeterministicSession::verify,
// docs/fingerprint.md, "Transcripts and verification"): every sample of a transcript runs
// as one teacher-forced request (prompt + its output, chunked prefill with every
// position's logits, EngineRequest::score_row), batched with everything else the engine
// runs; each row's token choice and digest are recomputed and compared. A client of the
// request pipeline like the replayer: its requests use no cache and are not observed.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "decode/token_trie.h"
#include "detinfer/fingerprint.h"
#include "detinfer/tokenizer.h"
#include "detinfer/transcript.h"
#include "engine/engine.h"
#include "session/request_prep.h"

namespace detinfer::session {

class Verifier {
 public:
  // All must outlive the verifier. `base` holds the session's numerics and model groups;
  // at most `wave` requests are queued at once.
  // `tokenizer` (may be null) gives constrained transcripts (a JSON response_format) the
  // token masks the output stage applied.
  Verifier(RequestPrep& prep, engine::Engine& engine, const RunFingerprint& base,
           std::int64_t vocab, std::int32_t wave, const Tokenizer* tokenizer);

  // Throws Error(kInvalidArgument) naming the field when a transcript names another
  // model, weight format, numerics spec, mode or KV format than this session's, or is
  // invalid here (prompt, ids, config); Error(kUnsupported) for beam search transcripts
  // and for sessions that are not in canonical mode; the engine's errors.
  std::vector<VerifyResult> verify(const std::vector<Transcript>& transcripts);

 private:
  RequestPrep& prep_;
  engine::Engine& engine_;
  const RunFingerprint& base_;
  std::int64_t vocab_;
  std::int32_t wave_;
  const Tokenizer* tokenizer_;
  // Every token's text, built by the first call (nullptr without a tokenizer).
  const decode::TokenTrie* trie();
  std::once_flag trie_once_;
  std::unique_ptr<decode::TokenTrie> trie_;
};

}  // namespace detinfer::session
