#include "devtools/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "core/check.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace detinfer::devtools {

const char kLlama3SplitPattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {
using PairKey = std::uint64_t;
inline PairKey key(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
         static_cast<std::uint32_t>(b);
}

struct HeapEntry {
  std::int64_t count;
  PairKey pair;
  // Max-heap on count; on a tie the smaller pair wins.
  bool operator<(const HeapEntry& o) const {
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

struct Trainer {
  std::vector<std::vector<std::int32_t>> words;
  std::vector<std::int64_t> word_counts;
  std::unordered_map<PairKey, std::int64_t> pair_counts;
  std::unordered_map<PairKey, std::vector<std::int32_t>> where;
  std::priority_queue<HeapEntry> heap;

  void add_pairs(std::int32_t w, std::int64_t sign, std::unordered_set<PairKey>* touched) {
    const auto& s = words[w];
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
      const PairKey k = key(s[i], s[i + 1]);
      pair_counts[k] += sign * word_counts[w];
      if (sign > 0) where[k].push_back(w);
      if (touched != nullptr) touched->insert(k);
    }
  }

  static void merge_word(std::vector<std::int32_t>& s, std::int32_t a, std::int32_t b,
                         std::int32_t id) {
    std::size_t out = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
        s[out++] = id;
        ++i;
      } else {
        s[out++] = s[i];
      }
    }
    s.resize(out);
  }
};

// The distinct pre-tokenized words and their counts, sorted (which fixes the numbering).
std::vector<std::pair<std::string, std::int64_t>> count_words(
    const std::vector<std::string_view>& texts, const tokenizer::Regex& split) {
  std::unordered_map<std::string, std::int64_t> counts;
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (const std::string_view text : texts) {
    const std::size_t bad = tokenizer::find_invalid_utf8(text);
    if (bad != std::string_view::npos) {
      fail(ErrorCode::kInvalidArgument, "BPE trainer: text is not valid UTF-8 at byte ", bad);
    }
    spans.clear();
    split.find_all(text, spans);
    for (const auto& [b, e] : spans) ++counts[std::string(text.substr(b, e - b))];
  }
  std::vector<std::pair<std::string, std::int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

}  // namespace

TrainedBpe train_byte_level_bpe(const std::vector<std::string_view>& texts,
                                const BpeTrainerOptions& options) {
  if (options.num_merges < 0 || options.min_frequency < 1) {
    fail(ErrorCode::kInvalidArgument,
         "BPE trainer: num_merges must be >= 0 and min_frequency >= 1");
  }
  const tokenizer::Regex split(options.split_pattern, false, "BPE trainer split_pattern");
  TrainedBpe out;
  std::array<std::int32_t, 256> byte_id{};
  for (int k = 0; k < 256; ++k) {
    const std::uint8_t b = tokenizer::byte_level_order()[k];
    byte_id[b] = k;
    out.vocab.push_back(tokenizer::byte_to_char(b));
  }

  Trainer t;
  for (const auto& [w, c] : count_words(texts, split)) {
    std::vector<std::int32_t> s;
    for (const char ch : w) s.push_back(byte_id[static_cast<std::uint8_t>(ch)]);
    t.words.push_back(std::move(s));
    t.word_counts.push_back(c);
  }
  for (std::int32_t w = 0; w < static_cast<std::int32_t>(t.words.size()); ++w) {
    t.add_pairs(w, +1, nullptr);
  }
  for (const auto& [k, c] : t.pair_counts) t.heap.push({c, k});

  while (static_cast<std::int64_t>(out.merges.size()) < options.num_merges && !t.heap.empty()) {
    const HeapEntry top = t.heap.top();
    t.heap.pop();
    const std::int64_t current = t.pair_counts[top.pair];
    if (current != top.count) {
      if (current > 0) t.heap.push({current, top.pair});
      continue;
    }
    if (current < options.min_frequency) break;
    const auto a = static_cast<std::int32_t>(top.pair >> 32);
    const auto b = static_cast<std::int32_t>(top.pair & 0xffffffffu);
    const auto id = static_cast<std::int32_t>(out.vocab.size());
    out.vocab.push_back(out.vocab[a] + out.vocab[b]);
    out.merges.emplace_back(out.vocab[a], out.vocab[b]);

    std::vector<std::int32_t> affected = std::move(t.where[top.pair]);
    t.where.erase(top.pair);
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    std::unordered_set<PairKey> touched;
    for (const std::int32_t w : affected) {
      auto& s = t.words[w];
      bool has = false;
      for (std::size_t i = 0; i + 1 < s.size() && !has; ++i) has = s[i] == a && s[i + 1] == b;
      if (!has) continue;
      t.add_pairs(w, -1, nullptr);
      Trainer::merge_word(s, a, b, id);
      t.add_pairs(w, +1, &touched);
    }
    t.pair_counts[top.pair] = 0;
    // Push in a fixed order so that equal entries are ordered the same on every run.
    std::vector<PairKey> keys(touched.begin(), touched.end());
    std::sort(keys.begin(), keys.end());
    for (const PairKey k : keys) {
      const std::int64_t c = t.pair_counts[k];
      if (c > 0) t.heap.push({c, k});
    }
  }
  return out;
}

}  // namespace detinfer::devtools
