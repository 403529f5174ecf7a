// Constrained decoding in the engine (docs/structured.md): each sample of a request with
// a JSON response_format walks its own JsonState, and its next token is chosen among the
// tokens whose text keeps that state alive. The mask depends only on the sample's own
// text, so outputs stay a pure function of the request, alone or batched.
#include <algorithm>

#include "core/check.h"
#include "engine/output_stage.h"

namespace detinfer::engine {

namespace {

constexpr const char kReplacement[] = "\xEF\xBF\xBD";

// The bytes each token adds to a text in the middle of a stream: decode(ctx, id) minus
// decode(ctx) (a SentencePiece-style decoder treats the first token differently), empty
// for special tokens and for tokens that are not whole UTF-8 characters (those decode to
// U+FFFD alone, so constrained outputs are built from whole characters).
std::vector<std::string> token_pieces(const Tokenizer& tok, std::int64_t vocab) {
  std::vector<std::int32_t> ctx;
  if (const auto a = tok.token_to_id("a")) ctx.push_back(*a);
  const std::string head = tok.decode(ctx, true);
  std::vector<std::string> pieces(static_cast<std::size_t>(vocab));
  const std::int64_t n = std::min<std::int64_t>(vocab, tok.vocab_size());
  for (std::int64_t id = 0; id < n; ++id) {
    const auto t = static_cast<std::int32_t>(id);
    if (!tok.id_to_token(t) || tok.is_special(t)) continue;
    std::vector<std::int32_t> ids = ctx;
    ids.push_back(t);
    const std::string text = tok.decode(ids, true);
    if (text.size() <= head.size() || text.compare(0, head.size(), head) != 0) continue;
    std::string piece = text.substr(head.size());
    if (piece.find(kReplacement) != std::string::npos) continue;
    pieces[static_cast<std::size_t>(id)] = std::move(piece);
  }
  return pieces;
}

}  // namespace

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
  trie_->mask(*s.json, allowed_);
  const GenerationConfig& c = g.req.config;
  if (!c.ignore_eos) {
    for (const std::int32_t id : *c.stop_token_ids) {
      if (id >= 0 && id < ctx_.vocab)
        allowed_[static_cast<std::size_t>(id)] = s.json->can_end() ? 1 : 0;
    }
  }
  if (std::find(allowed_.begin(), allowed_.end(), std::uint8_t{1}) == allowed_.end()) {
    throw Error(ErrorCode::kInvalidArgument,
                "GenerationConfig.response_format: no token of the vocabulary can continue the "
                "JSON text (a character the schema requires has no token of its own)",
                "response_format");
  }
  return &allowed_;
}

bool OutputStage::advance_structure(const Group& g, SeqState& s, std::int32_t token) {
  if (!s.json) return false;
  const auto& stop_ids = *g.req.config.stop_token_ids;
  if (!g.req.config.ignore_eos &&
      std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end()) {
    return false;  // the sample ends here; its text is complete (the mask allowed it)
  }
  const bool ok = s.json->advance(trie_->piece(token));
  DETINFER_INTERNAL_CHECK(ok);  // the mask allowed only tokens the state accepts
  return s.json->done();
}

}  // namespace detinfer::engine
