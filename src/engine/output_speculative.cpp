// Speculative decoding in the engine (docs/speculative.md). A sample that speculates feeds
// its pending token and up to draft_tokens drafted tokens in one verify pass that returns
// a logits row per token. Row j holds the logits after the pending token and drafts
// 0..j-1: in canonical mode, the bits a plain decode step at that position computes
// (logits do not depend on the rows a pass carries). Each row's token is chosen by
// sample_step, exactly as plain decoding chooses it (same processors, history, Philox
// step, token mask); the next row is used only while the chosen token equals the draft
// that row was computed after. So tokens, digests, logprobs and text are those of plain
// decoding by construction, and the K/V kept is only that of tokens the target chose:
// rejected drafts' K/V lies beyond num_computed, is overwritten by the next step and is
// never published to the prefix cache (publish_generated stops at num_computed).
#include "decode/ngram_drafter.h"
#include "engine/output_stage.h"

namespace detinfer::engine {
namespace {

// The adaptive draft length (docs/speculative.md, "Adaptive draft length"). It decides
// only how many tokens are proposed, never which token is chosen, so it cannot change an
// output; it keeps a drafter that is often wrong from costing rows every step.
void adapt_draft_length(const GenerationConfig& c, SeqState& s, std::int64_t drafted_here,
                        std::int64_t accepted_here) {
  constexpr std::int32_t kMaxPause = 16;
  if (accepted_here == 0) {
    if (s.draft_len > 1) {
      s.draft_len /= 2;  // fewer rows for the next try
    } else {
      // Wrong again at length 1: skip 1, 2, 4, ... (at most 16) steps before the next.
      s.draft_misses = std::min(s.draft_misses + 1, 5);
      s.draft_pause = std::min(kMaxPause, 1 << (s.draft_misses - 1));
    }
    return;
  }
  s.draft_misses = 0;
  s.draft_len = accepted_here == drafted_here ? std::min(s.draft_len + 1, c.draft_tokens)
                                              : static_cast<std::int32_t>(accepted_here + 1);
}

}  // namespace

std::int32_t OutputStage::plan_draft(const Group& g, SeqState& s, std::int64_t budget) const {
  s.draft.clear();
  const GenerationConfig& c = g.req.config;
  if (c.draft_tokens <= 0 || g.beam) return 0;
  // A step may add up to 1 + k tokens: never past max_new_tokens, so the K/V written
  // stays within the request's reservation (prompt + max_new_tokens - 1 positions).
  const std::int64_t room =
      static_cast<std::int64_t>(c.max_new_tokens) - static_cast<std::int64_t>(s.generated.size());
  if (s.draft_len == 0) s.draft_len = c.draft_tokens;
  if (s.draft_pause > 0) {  // backing off after passes that accepted nothing
    --s.draft_pause;
    return 0;
  }
  const auto max =
      static_cast<std::int32_t>(std::min<std::int64_t>({s.draft_len, room - 1, budget}));
  if (max <= 0) return 0;
  if (g.req.drafter) {
    g.req.drafter(s.sample_index, s.generated, max, s.draft);
  } else {
    decode::ngram_draft(g.req.prompt, s.generated, c.draft_ngram_min, c.draft_ngram_max, max,
                        s.draft);
  }
  if (static_cast<std::int32_t>(s.draft.size()) > max)
    s.draft.resize(static_cast<std::size_t>(max));
  // A token the model cannot read ends the draft (a hook's bad proposal is not an error).
  for (std::size_t i = 0; i < s.draft.size(); ++i) {
    if (s.draft[i] < 0 || s.draft[i] >= ctx_.vocab) {
      s.draft.resize(i);
      break;
    }
  }
  return static_cast<std::int32_t>(s.draft.size());
}

void OutputStage::verify_drafts(Group& g, SeqState& s, const float* rows) {
  const std::vector<std::int32_t> draft = std::move(s.draft);
  s.draft.clear();
  ++s.num_computed;  // the pending token's K/V
  std::int64_t accepted_here = 0;
  for (std::size_t j = 0;; ++j) {
    sample_step(g, s, rows + static_cast<std::int64_t>(j) * ctx_.vocab);
    if (j == draft.size()) break;  // every draft accepted: this row's token is a bonus
    const bool match = s.generated.back() == draft[j];
    if (match) ++accepted_here;
    // Plain decoding would stop here too: the sample finished, or its callback asked to
    // cancel (the next step's cancellation check ends it with what it has).
    if (!match || s.finished || g.cancelled()) break;
    ++s.num_computed;  // draft j's K/V was computed with the token the target chose
  }
  DraftTally& t = drafts_[static_cast<int>(g.req.drafter ? Drafter::kModel : Drafter::kNgram)];
  t.drafted += static_cast<std::int64_t>(draft.size());
  t.accepted += accepted_here;
  adapt_draft_length(g.req.config, s, static_cast<std::int64_t>(draft.size()), accepted_here);
}

}  // namespace detinfer::engine
