// Constrained decoding's token masks (docs/structured.md), one rule for the engine's
// output stage and the transcript verifier (session/verifier.cpp): the trie of every
// token's text, and the mask of a sample's JSON state with the stop ids allowed exactly
// when the value can end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "decode/json_automaton.h"
#include "decode/token_trie.h"
#include "detinfer/generation.h"
#include "detinfer/tokenizer.h"

namespace detinfer::engine {

// The bytes each token adds to a text in the middle of a stream: decode(ctx, id) minus
// decode(ctx) (a SentencePiece-style decoder treats the first token differently), empty
// for special tokens and for tokens that are not whole UTF-8 characters (those decode to
// U+FFFD alone, so constrained outputs are built from whole characters).
std::vector<std::string> token_pieces(const Tokenizer& tok, std::int64_t vocab);

// allowed[id] = 1 for the tokens `state` accepts, and for the stop ids (unless
// config.ignore_eos) exactly when the value can end. Error(kInvalidArgument) naming
// response_format when no token is allowed.
void structured_mask(const decode::TokenTrie& trie, const decode::JsonState& state,
                     const GenerationConfig& config, std::int64_t vocab,
                     std::vector<std::uint8_t>& allowed);

// Whether `token` ends the sample as a stop id (not when config.ignore_eos).
bool is_stop_token(const GenerationConfig& config, std::int32_t token);

}  // namespace detinfer::engine
