// Constrained decoding in the engine (docs/structured.md): each sample of a request with
// a JSON response_format walks its own JsonState, and its next token is chosen among the
// tokens whose text keeps that state alive. The mask depends only on the sample's own
// text, so outputs stay a pure function of the request, alone or batched.
#include <algorithm>

#include "core/check.h"
#include "engine/output_stage.h"
#include "engine/structured_masks.h"

namespace detinfer::engine {

void OutputStage::start_structure(Group& g) {
  g.grammar = decode::compile_response_format(g.req.config.response_format);
  if (!g.grammar) return;
  if (ctx_.tokenizer == nullptr) {
    throw Error(ErrorCode::kInvalidArgument,
                "GenerationConfig.response_format needs the model's tokenizer (the engine has "
                "none)",
                "response_format");
  }
  if (!trie_)
    trie_ = std::make_unique<decode::TokenTrie>(token_pieces(*ctx_.tokenizer, ctx_.vocab));
  for (SeqState& s : g.seqs) s.json.emplace(g.grammar.get());
}

const std::vector<std::uint8_t>* OutputStage::token_mask(const Group& g, const SeqState& s) {
  if (!s.json) return nullptr;
  structured_mask(*trie_, *s.json, g.req.config, ctx_.vocab, allowed_);
  return &allowed_;
}

bool OutputStage::advance_structure(const Group& g, SeqState& s, std::int32_t token) {
  if (!s.json) return false;
  if (is_stop_token(g.req.config, token)) {
    return false;  // the sample ends here; its text is complete (the mask allowed it)
  }
  const bool ok = s.json->advance(trie_->piece(token));
  DETINFER_INTERNAL_CHECK(ok);  // the mask allowed only tokens the state accepts
  return s.json->done();
}

}  // namespace detinfer::engine
