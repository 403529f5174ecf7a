#include "session/replay.h"

#include <string>

namespace detinfer::session {

namespace {
// Why `original` cannot be re-run on a session with `base`, or "" when it can.
std::string refusal(const RunFingerprint& original, const RunFingerprint& base) {
  if (original.model.fingerprint != base.model.fingerprint) {
    return "model differs: the fingerprint was recorded with model " +
           original.model.fingerprint.hex() + ", this session has " + base.model.fingerprint.hex();
  }
  if (original.tokenizer_hash != base.tokenizer_hash) {
    return "tokenizer differs: the fingerprint was recorded with tokenizer " +
           original.tokenizer_hash.hex() + ", this session has " + base.tokenizer_hash.hex();
  }
  if (!original.request.prompt_tokens) {
    return "the fingerprint records only the prompt's hash and length (store_prompt_tokens = "
           "false): the request cannot be re-run";
  }
  return {};
}

// The verdict and reason of a replay that ran.
void judge(const RunFingerprint& original, const RunFingerprint& replayed, ReplayReport& rep) {
  rep.diff = diff(original, replayed);
  if (!rep.diff.reproduced()) {
    rep.verdict = ReplayVerdict::kDiverged;
    if (rep.diff.divergence) {
      const StepDivergence& d = *rep.diff.divergence;
      rep.reason = "first divergence: sequence " + std::to_string(d.sequence) + ", step " +
                   std::to_string(d.step) + " (" + d.reason + ")";
    } else {
      rep.reason = rep.diff.output_note.empty() ? "outputs differ" : rep.diff.output_note;
    }
  } else if (original.numerics.mode != replayed.numerics.mode) {
    rep.verdict = ReplayVerdict::kDiverged;
    rep.reason = "numerics mode differs (" + original.numerics.mode + " vs " +
                 replayed.numerics.mode +
                 "): the outputs agree, but only a replay in the "
                 "recorded mode proves reproduction";
  } else {
    rep.verdict = ReplayVerdict::kReproduced;
  }
}
}  // namespace

Replayer::Replayer(RequestPrep& prep, engine::Engine& engine, const RunFingerprint& base,
                   const SessionMetrics& metrics)
    : prep_(prep), engine_(engine), base_(base), metrics_(metrics) {}

RunFingerprint Replayer::run(const std::vector<std::int32_t>& prompt,
                             const GenerationConfig& config) {
  RequestPolicy policy;
  policy.use_caches = false;
  policy.observed = false;
  engine::EngineRequest r = prep_.prepare(Prompt(prompt), config, {}, policy);
  const GenerationConfig normalized = r.config;
  GenerationResult result = engine_.submit(std::move(r)).get();
  return fingerprint_of(base_, normalized, result, true);
}

RunFingerprint Replayer::rerun(const RunFingerprint& original) {
  GenerationConfig config = original.request.config;
  config.seed = original.request.seed;
  return run(*original.request.prompt_tokens, config);
}

ReplayReport Replayer::replay(const RunFingerprint& original) {
  ReplayReport rep;
  rep.reason = refusal(original, base_);
  if (!rep.reason.empty()) return rep;
  RunFingerprint replayed;
  try {
    replayed = rerun(original);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidArgument) throw;
    rep.reason = std::string("the recorded request is invalid for this session: ") + e.what();
    return rep;
  }
  judge(original, replayed, rep);
  (rep.reproduced() ? metrics_.replay_match : metrics_.replay_mismatch).inc();
  rep.replayed = std::move(replayed);
  return rep;
}

}  // namespace detinfer::session
