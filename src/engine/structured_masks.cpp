#include "engine/structured_masks.h"

#include <algorithm>

#include "core/check.h"

namespace detinfer::engine {

namespace {

constexpr const char kReplacement[] = "\xEF\xBF\xBD";

}  // namespace

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

bool is_stop_token(const GenerationConfig& config, std::int32_t token) {
  const auto& ids = *config.stop_token_ids;
  return !config.ignore_eos && std::find(ids.begin(), ids.end(), token) != ids.end();
}

void structured_mask(const decode::TokenTrie& trie, const decode::JsonState& state,
                     const GenerationConfig& config, std::int64_t vocab,
                     std::vector<std::uint8_t>& allowed) {
  trie.mask(state, allowed);
  if (!config.ignore_eos) {
    for (const std::int32_t id : *config.stop_token_ids) {
      if (id >= 0 && id < vocab) allowed[static_cast<std::size_t>(id)] = state.can_end() ? 1 : 0;
    }
  }
  if (std::find(allowed.begin(), allowed.end(), std::uint8_t{1}) == allowed.end()) {
    throw Error(ErrorCode::kInvalidArgument,
                "GenerationConfig.response_format: no token of the vocabulary can continue the "
                "JSON text (a character the schema requires has no token of its own)",
                "response_format");
  }
}

}  // namespace detinfer::engine
