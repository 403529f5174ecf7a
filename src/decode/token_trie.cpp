#include "decode/token_trie.h"

#include <algorithm>

namespace detinfer::decode {

namespace {

// Longer pieces are never allowed (no real vocabulary has them; bounds the walk's depth).
constexpr std::size_t kMaxPieceBytes = 256;

// The number of characters of a piece that a string body accepts whole (valid UTF-8, no
// control character, quote or backslash), or -1.
std::int32_t plain_chars(const std::string& s) {
  std::int32_t chars = 0;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<std::uint8_t>(s[i]);
    if (c < 0x20 || c == '"' || c == '\\') return -1;
    std::size_t n = 1;
    std::uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0x80) {
      if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
      } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
      } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
      } else {
        return -1;
      }
    }
    if (i + n > s.size()) return -1;
    for (std::size_t k = 1; k < n; ++k) {
      const auto d = static_cast<std::uint8_t>(s[i + k]);
      if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return -1;
    }
    i += n;
    ++chars;
  }
  return chars;
}

}  // namespace

TokenTrie::TokenTrie(const std::vector<std::string>& pieces) : pieces_(pieces) {
  std::vector<std::int32_t> all, rest;
  for (std::size_t id = 0; id < pieces.size(); ++id) {
    const auto i = static_cast<std::int32_t>(id);
    if (pieces[id].empty() || pieces[id].size() > kMaxPieceBytes) {
      pieces_[id].clear();
      continue;
    }
    all.push_back(i);
    const std::int32_t chars = plain_chars(pieces[id]);
    if (chars > 0) {
      plain_.emplace_back(chars, i);
    } else {
      rest.push_back(i);
    }
  }
  std::sort(plain_.begin(), plain_.end());
  all_ = build(pieces_, std::move(all));
  rest_ = build(pieces_, std::move(rest));
}

TokenTrie::Trie TokenTrie::build(const std::vector<std::string>& pieces,
                                 std::vector<std::int32_t> order) {
  Trie t;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int32_t a, std::int32_t b) { return pieces[a] < pieces[b]; });
  std::vector<std::int32_t> path;  // open nodes, path[k] at depth k + 1
  const std::string* prev = nullptr;
  for (const std::int32_t id : order) {
    const std::string& s = pieces[id];
    std::size_t lcp = 0;
    if (prev != nullptr) {
      while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
    }
    while (path.size() > lcp) {
      t.nodes[path.back()].end = static_cast<std::int32_t>(t.nodes.size());
      path.pop_back();
    }
    for (std::size_t k = lcp; k < s.size(); ++k) {
      TrieNode n;
      n.byte = static_cast<std::uint8_t>(s[k]);
      n.depth = static_cast<std::uint16_t>(k + 1);
      n.tok_begin = n.tok_end = static_cast<std::int32_t>(t.ids.size());
      path.push_back(static_cast<std::int32_t>(t.nodes.size()));
      t.nodes.push_back(n);
    }
    // Equal pieces are adjacent in the order, so a node's tokens are contiguous.
    TrieNode& last = t.nodes[path.back()];
    if (last.tok_begin == last.tok_end) last.tok_begin = static_cast<std::int32_t>(t.ids.size());
    t.ids.push_back(id);
    last.tok_end = static_cast<std::int32_t>(t.ids.size());
    t.max_depth = std::max<std::uint16_t>(t.max_depth, static_cast<std::uint16_t>(s.size()));
    prev = &s;
  }
  for (const std::int32_t i : path) t.nodes[i].end = static_cast<std::int32_t>(t.nodes.size());
  return t;
}

// After node i: its tokens are allowed and the walk goes below it when `accepted`; else
// its whole subtree is skipped (no token below a rejected prefix can be accepted).
std::size_t TokenTrie::next_node(const Trie& t, std::size_t i, bool accepted,
                                 std::vector<std::uint8_t>& allowed, std::size_t& count) {
  const TrieNode& n = t.nodes[i];
  if (!accepted) return static_cast<std::size_t>(n.end);
  for (std::int32_t k = n.tok_begin; k < n.tok_end; ++k) allowed[t.ids[k]] = 1;
  count += static_cast<std::size_t>(n.tok_end - n.tok_begin);
  return i + 1;
}

std::size_t TokenTrie::walk(const Trie& t, const JsonState& state,
                            std::vector<std::uint8_t>& allowed) {
  std::vector<JsonState> at(static_cast<std::size_t>(t.max_depth) + 1, state);
  std::size_t count = 0;
  for (std::size_t i = 0; i < t.nodes.size();) {
    const TrieNode& n = t.nodes[i];
    JsonState& s = at[n.depth];
    s.copy_from(at[n.depth - 1]);
    i = next_node(t, i, s.advance(n.byte), allowed, count);
  }
  return count;
}

// Nodes are walked with a PatternCursor per depth while the string stays open. At a node
// whose byte closes it, the whole state is rebuilt from the path (state + the node's
// bytes) and that subtree continues through full JsonStates, as walk() does.
std::size_t TokenTrie::walk_pattern(const Trie& t, const JsonState& state, const PatternDfa& dfa,
                                    const PatternCursor& start,
                                    std::vector<std::uint8_t>& allowed) {
  const std::size_t depths = static_cast<std::size_t>(t.max_depth) + 1;
  std::vector<PatternCursor> at(depths, start);
  std::vector<JsonState> full(depths, state);
  std::string path(depths, '\0');
  std::size_t full_end = 0;  // nodes before it (in a closing subtree) walk full states
  std::size_t count = 0;
  for (std::size_t i = 0; i < t.nodes.size();) {
    const TrieNode& n = t.nodes[i];
    path[n.depth] = static_cast<char>(n.byte);
    bool ok = false;
    if (i < full_end) {
      JsonState& s = full[n.depth];
      s.copy_from(full[n.depth - 1]);
      ok = s.advance(n.byte);
    } else {
      PatternCursor c = at[n.depth - 1];
      const PatternByte r = dfa.step(c, n.byte);
      if (r == PatternByte::kTaken) {
        at[n.depth] = c;
        ok = true;
      } else if (r == PatternByte::kClose) {
        JsonState& s = full[n.depth];
        s.copy_from(state);
        ok = s.advance(path.substr(1, n.depth));
        full_end = static_cast<std::size_t>(n.end);
      }
    }
    i = next_node(t, i, ok, allowed, count);
  }
  return count;
}

std::size_t TokenTrie::mask(const JsonState& state, std::vector<std::uint8_t>& allowed) const {
  allowed.assign(pieces_.size(), 0);
  PatternCursor cursor;
  if (const PatternDfa* dfa = state.pattern_top(cursor)) {
    return walk_pattern(all_, state, *dfa, cursor, allowed);
  }
  const std::int64_t room = state.string_room();
  if (room < 0) return walk(all_, state, allowed);
  std::size_t count = 0;
  for (const auto& [chars, id] : plain_) {
    if (chars > room) break;
    allowed[id] = 1;
    ++count;
  }
  return count + walk(rest_, state, allowed);
}

}  // namespace detinfer::decode
