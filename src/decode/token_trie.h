// The token mask of constrained decoding: every vocabulary token's text bytes in a trie
// (stored in preorder, so a walk is one linear scan that skips rejected subtrees), walked
// through copies of a JsonState. Tokens sharing a prefix share its work, so a step costs
// one automaton byte per trie node the state keeps alive, never per token and byte.
// Inside a free string, where nearly every token stays alive, "plain" tokens (no control
// character, quote or backslash) are allowed by their character count alone and only
// the other tokens are walked. Inside a pattern string the trie is walked through the
// pattern's DFA alone (a table lookup per node) until a token closes the string; only
// those subtrees go through the whole automaton.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "decode/json_automaton.h"

namespace detinfer::decode {

class TokenTrie {
 public:
  // pieces[id]: the bytes the token adds to the text; an empty piece is never allowed
  // (special tokens, tokens that are not whole UTF-8 characters, ids without a token).
  explicit TokenTrie(const std::vector<std::string>& pieces);

  // allowed[id] = 1 for every token whose whole piece `state` accepts (0 otherwise; the
  // vector is resized to the number of pieces). Returns how many are allowed.
  std::size_t mask(const JsonState& state, std::vector<std::uint8_t>& allowed) const;

  const std::string& piece(std::int32_t id) const { return pieces_[id]; }
  std::size_t node_count() const { return all_.nodes.size(); }

 private:
  struct TrieNode {
    std::uint8_t byte = 0;
    std::uint16_t depth = 0;                  // 1 for a first byte
    std::int32_t end = 0;                     // one past the last node of this subtree (preorder)
    std::int32_t tok_begin = 0, tok_end = 0;  // ids of the tokens ending here
  };
  struct Trie {
    std::vector<TrieNode> nodes;  // preorder
    std::vector<std::int32_t> ids;
    std::uint16_t max_depth = 0;
  };
  static Trie build(const std::vector<std::string>& pieces, std::vector<std::int32_t> order);
  static std::size_t next_node(const Trie& t, std::size_t i, bool accepted,
                               std::vector<std::uint8_t>& allowed, std::size_t& count);
  static std::size_t walk(const Trie& t, const JsonState& state,
                          std::vector<std::uint8_t>& allowed);
  static std::size_t walk_pattern(const Trie& t, const JsonState& state, const PatternDfa& dfa,
                                  const PatternCursor& start, std::vector<std::uint8_t>& allowed);

  std::vector<std::string> pieces_;
  Trie all_;   // every token with a piece
  Trie rest_;  // the tokens that are not plain
  // Plain tokens by character count, ascending: (count, id).
  std::vector<std::pair<std::int32_t, std::int32_t>> plain_;
};

}  // namespace detinfer::decode
