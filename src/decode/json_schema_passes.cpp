#include "decode/json_schema_passes.h"

#include <algorithm>

#include "core/check.h"

namespace detinfer::decode {

namespace {

// Replaces every union's alternatives by the non-union nodes they reach through unions
// (in order, each once). Iterative; a union reached again adds nothing.
void flatten_unions(JsonGrammar& g) {
  std::vector<std::int32_t> seen(g.nodes.size(), -1);
  std::vector<std::int32_t> todo;
  for (std::size_t u = 0; u < g.nodes.size(); ++u) {
    if (g.nodes[u].kind != NodeKind::kUnion) continue;
    std::vector<std::int32_t> leaves;
    todo.assign(g.nodes[u].alts.rbegin(), g.nodes[u].alts.rend());
    seen[u] = static_cast<std::int32_t>(u);
    while (!todo.empty()) {
      const std::int32_t k = todo.back();
      todo.pop_back();
      if (seen[k] == static_cast<std::int32_t>(u)) continue;
      seen[k] = static_cast<std::int32_t>(u);
      const Node& n = g.nodes[k];
      if (n.kind == NodeKind::kUnion) {
        todo.insert(todo.end(), n.alts.rbegin(), n.alts.rend());
      } else {
        leaves.push_back(k);
      }
    }
    g.nodes[u].alts = std::move(leaves);
  }
}

// How many automaton stacks a node can keep alive at once (unions of distinct types
// resolve at their first byte; other unions add up).
std::int32_t width(const JsonGrammar& g, const std::vector<std::uint8_t>& bits, std::int32_t i,
                   std::vector<std::int32_t>& memo) {
  if (memo[i] != 0) return memo[i] < 0 ? 1 : memo[i];
  memo[i] = -1;  // in progress: a cycle (any, a recursive $ref) does not multiply
  const Node& n = g.nodes[i];
  std::int32_t w = 1;
  std::vector<std::int32_t> kids = n.alts;
  for (const Property& p : n.props) kids.push_back(p.value);
  kids.insert(kids.end(), n.prefix.begin(), n.prefix.end());
  if (n.items >= 0) kids.push_back(n.items);
  if (n.additional >= 0) kids.push_back(n.additional);
  std::uint8_t seen = 0;
  bool disjoint = true;
  std::int32_t sum = 0;
  for (const std::int32_t k : kids) {
    const std::int32_t wk = width(g, bits, k, memo);
    w = std::max(w, wk);
    sum = std::min(sum + wk, kMaxStacks + 1);
    disjoint = disjoint && (bits[k] & seen) == 0;
    seen |= bits[k];
  }
  if (n.kind == NodeKind::kUnion && !disjoint) w = sum;
  memo[i] = w;
  return w;
}

// One node's min_frames from its children's current values (kMaxFrames + 1: none).
std::int32_t frames_of(const JsonGrammar& g, const Node& n) {
  constexpr std::int32_t kNone = kMaxFrames + 1;
  std::int32_t kids = 0;
  switch (n.kind) {
    case NodeKind::kUnion:
      kids = kNone;
      for (const std::int32_t a : n.alts) kids = std::min(kids, g.nodes[a].min_frames);
      return kids;
    case NodeKind::kObject:
      for (const Property& p : n.props) {
        if (p.required) kids = std::max(kids, g.nodes[p.value].min_frames);
      }
      break;
    case NodeKind::kArray:
      for (std::int32_t i = 0; i < n.min_items; ++i) {
        const std::int32_t item =
            i < static_cast<std::int32_t>(n.prefix.size()) ? n.prefix[i] : n.items;
        kids = std::max(kids, g.nodes[item].min_frames);
      }
      break;
    case NodeKind::kLiteral:
      return n.literals.empty() ? kNone : 1;
    default:
      return 1;
  }
  return std::min(kNone, 1 + kids);
}

// Greatest-to-least fixpoint from "none": values only decrease, and a node needing v
// frames is exact after at most 2v rounds (a union takes one round after its
// alternatives), so the loop ends after at most 2 * kMaxFrames + 3 rounds.
void compute_min_frames(JsonGrammar& g) {
  for (Node& n : g.nodes) n.min_frames = kMaxFrames + 1;
  for (;;) {
    bool changed = false;
    for (Node& n : g.nodes) {
      const std::int32_t f = frames_of(g, n);
      if (f < n.min_frames) {
        n.min_frames = f;
        changed = true;
      }
    }
    if (!changed) break;
  }
}

}  // namespace

void schema_error(const std::string& where, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument,
              str_cat("GenerationConfig.response_format: ", what, " (at schema #", where, ")"),
              "response_format");
}

const nlohmann::ordered_json* resolve_schema_pointer(const nlohmann::ordered_json& root,
                                                     const std::string& text,
                                                     const std::string& where) {
  if (text.empty() || text[0] != '#' || (text.size() > 1 && text[1] != '/') ||
      text.find('%') != std::string::npos) {
    schema_error(where, str_cat("$ref '", text,
                                "' is not supported (only '#' and JSON pointers into this "
                                "schema such as '#/$defs/name', without percent-encoding)"));
  }
  const nlohmann::ordered_json* cur = &root;
  for (std::size_t i = 1; i < text.size();) {
    std::size_t j = text.find('/', i + 1);
    if (j == std::string::npos) j = text.size();
    std::string token;
    for (std::size_t k = i + 1; k < j; ++k) {
      if (text[k] != '~') {
        token += text[k];
      } else if (k + 1 < j && (text[k + 1] == '0' || text[k + 1] == '1')) {
        token += text[++k] == '0' ? '~' : '/';
      } else {
        schema_error(where, str_cat("$ref '", text, "' is not a valid JSON pointer"));
      }
    }
    const auto found = cur->is_object() ? cur->find(token) : cur->end();
    if (found != cur->end()) {
      cur = &*found;
    } else if (cur->is_array() && !token.empty() && token.size() < 6 &&
               token.find_first_not_of("0123456789") == std::string::npos &&
               std::stoul(token) < cur->size()) {
      cur = &(*cur)[std::stoul(token)];
    } else {
      schema_error(where, str_cat("$ref '", text, "' does not resolve in the schema"));
    }
    i = j;
  }
  return cur;
}

void finish_grammar(JsonGrammar& g, std::vector<std::uint8_t>& bits,
                    const std::vector<OneOfCheck>& one_ofs) {
  flatten_unions(g);
  for (std::size_t u = 0; u < g.nodes.size(); ++u) {
    if (g.nodes[u].kind != NodeKind::kUnion) continue;
    bits[u] = 0;
    for (const std::int32_t a : g.nodes[u].alts) bits[u] |= bits[a];
  }
  for (const OneOfCheck& c : one_ofs) {
    std::uint8_t b = 0;
    for (std::size_t i = 0; i < c.alts.size(); ++i) {
      if ((bits[c.alts[i]] & b) != 0) {
        schema_error(c.where, str_cat("oneOf alternative ", i,
                                      " can match the same JSON type as an earlier one (only "
                                      "oneOf of distinct types is supported)"));
      }
      b |= bits[c.alts[i]];
    }
  }
  std::vector<std::int32_t> memo(g.nodes.size(), 0);
  if (width(g, bits, g.root, memo) > kMaxStacks) {
    schema_error("", str_cat("anyOf alternatives that stay ambiguous in more than ", kMaxStacks,
                             " ways at once are not supported"));
  }
  compute_min_frames(g);
  if (g.nodes[g.root].min_frames > kMaxFrames) {
    schema_error("", str_cat("the schema admits no value nested at most ", kMaxSchemaDepth,
                             " levels deep (a $ref cycle without a way out, or $ref chains "
                             "nesting required values too deep)"));
  }
}

}  // namespace detinfer::decode
