// The merges of a SentencePiece-style GGUF vocabulary, implied by its scores (docs/gguf.md,
// "Tokenizers"). Bounded for hostile files: the prefixes and suffixes of each token are
// looked up by hashes computed incrementally (FNV-1a forward for prefixes, over the
// reversed bytes for suffixes), and bytes are compared only when both halves hit, so the
// work is linear in the tokens' bytes plus the bytes of the merges found, and those are
// capped (kMaxMergeBytes, beyond which the tokenizer.json could not be loaded anyway).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "core/check.h"
#include "detinfer/error.h"
#include "model/gguf_tokenizer.h"

namespace detinfer::model {

namespace {
constexpr std::uint64_t kFnvBasis = 0xcbf29ce484222325ull;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ull;
// Tokenizer::from_json reads at most 128 MiB of tokenizer.json.
constexpr std::size_t kMaxMergeBytes = std::size_t{128} << 20;

std::uint64_t fnv_step(std::uint64_t h, char c) {
  return (h ^ static_cast<unsigned char>(c)) * kFnvPrime;
}

std::uint64_t key(std::uint64_t h, std::size_t len) { return h ^ (len * 0x9e3779b97f4a7c15ull); }

// Token ids by the (hash, length) of their bytes, forward or reversed.
class HashIndex {
 public:
  HashIndex(const std::vector<std::string>& tokens, const std::vector<bool>& in_vocab,
            bool reversed) {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (!in_vocab[i]) continue;
      const std::string& t = tokens[i];
      std::uint64_t h = kFnvBasis;
      if (reversed) {
        for (auto it = t.rbegin(); it != t.rend(); ++it) h = fnv_step(h, *it);
      } else {
        for (const char c : t) h = fnv_step(h, c);
      }
      map_.emplace(key(h, t.size()), static_cast<std::int32_t>(i));
    }
  }
  // The id of the token equal to `text` whose hash is `h`, or -1.
  std::int32_t find(std::uint64_t h, std::string_view text,
                    const std::vector<std::string>& tokens) const {
    const auto range = map_.equal_range(key(h, text.size()));
    for (auto it = range.first; it != range.second; ++it) {
      if (tokens[it->second] == text) return it->second;
    }
    return -1;
  }
  bool has(std::uint64_t h, std::size_t len) const { return map_.count(key(h, len)) != 0; }

 private:
  std::unordered_multimap<std::uint64_t, std::int32_t> map_;
};

std::size_t code_points(std::string_view s) {
  return static_cast<std::size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

struct Candidate {
  double score;
  std::size_t left_len, right_len;
  std::int32_t merged, left, right;
};

bool ranks_before(const Candidate& a, const Candidate& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.left_len != b.left_len) return a.left_len > b.left_len;
  if (a.right_len != b.right_len) return a.right_len > b.right_len;
  if (a.merged != b.merged) return a.merged < b.merged;
  if (a.left != b.left) return a.left < b.left;
  return a.right < b.right;
}
}  // namespace

std::vector<std::pair<std::string, std::string>> gguf_spm_merges(
    const std::vector<std::string>& tokens, const std::vector<double>& scores,
    const std::vector<bool>& in_vocab) {
  DETINFER_INTERNAL_CHECK(scores.size() == tokens.size() && in_vocab.size() == tokens.size());
  for (std::size_t i = 0; i < scores.size(); ++i) {
    if (!std::isfinite(scores[i])) {
      fail(ErrorCode::kInvalidArgument, "gguf_spm_merges: score ", i, " is not finite");
    }
  }
  const HashIndex prefixes(tokens, in_vocab, false), suffixes(tokens, in_vocab, true);
  std::vector<Candidate> c;
  std::vector<std::uint64_t> suffix_hash;
  std::size_t merge_bytes = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (!in_vocab[i]) continue;
    const std::string_view t = tokens[i];
    suffix_hash.assign(t.size() + 1, kFnvBasis);  // suffix_hash[k]: t[k:] reversed
    for (std::size_t k = t.size(); k-- > 0;) suffix_hash[k] = fnv_step(suffix_hash[k + 1], t[k]);
    std::uint64_t h = kFnvBasis;
    for (std::size_t k = 1; k < t.size(); ++k) {
      h = fnv_step(h, t[k - 1]);
      if ((static_cast<unsigned char>(t[k]) & 0xC0) == 0x80) continue;  // inside a character
      if (!prefixes.has(h, k) || !suffixes.has(suffix_hash[k], t.size() - k)) continue;
      const std::int32_t l = prefixes.find(h, t.substr(0, k), tokens);
      const std::int32_t r = suffixes.find(suffix_hash[k], t.substr(k), tokens);
      if (l < 0 || r < 0) continue;
      merge_bytes += t.size() + 8;
      if (merge_bytes > kMaxMergeBytes) {
        throw Error(ErrorCode::kCorrupt,
                    "GGUF metadata 'tokenizer.ggml.tokens': the vocabulary implies more than "
                    "128 MiB of merges",
                    "tokenizer.ggml.tokens");
      }
      c.push_back({scores[i], code_points(tokens[l]), code_points(tokens[r]),
                   static_cast<std::int32_t>(i), l, r});
    }
  }
  std::sort(c.begin(), c.end(), ranks_before);
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(c.size());
  for (const Candidate& m : c) merges.emplace_back(tokens[m.left], tokens[m.right]);
  return merges;
}

}  // namespace detinfer::model
