#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace detinfer::tokenizer {

namespace {
constexpr std::int32_t kNoRank = 0x7fffffff;
// Words up to this many symbols use the quadratic scan (no allocation); longer ones the
// heap. CJK runs of 20-40 characters (60-120 byte symbols) stay on the scan.
constexpr std::size_t kSmallWord = 128;

std::pair<std::string, std::string> parse_merge(const Json& m, std::size_t i,
                                                const std::string& where) {
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const std::size_t sp = s.find(' ');
    if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
      fail(ErrorCode::kCorrupt, where, ".merges[", i, "]: '", s,
           "' is not two tokens separated by one space");
    }
    return {s.substr(0, sp), s.substr(sp + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  fail(ErrorCode::kCorrupt, where, ".merges[", i, "]: expected \"a b\" or [\"a\", \"b\"]");
}
}  // namespace

BpeModel::BpeModel(const Json& model, const std::string& where) {
  const std::string type = get_optional_string(model, "type", where);
  // Old files omit "type"; a BPE model is recognised by its merges.
  if (type.empty() ? !model.contains("merges") : type != "BPE") {
    unsupported(where, "model type '" + (type.empty() ? std::string("(none)") : type) +
                           "' (only BPE is supported)");
  }
  const auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null() &&
      !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    unsupported(where, "BPE dropout (random tokenization)");
  }
  if (!get_optional_string(model, "continuing_subword_prefix", where).empty()) {
    unsupported(where, "BPE continuing_subword_prefix");
  }
  if (!get_optional_string(model, "end_of_word_suffix", where).empty()) {
    unsupported(where, "BPE end_of_word_suffix");
  }
  fuse_unk_ = get_bool(model, "fuse_unk", false, where);
  byte_fallback_ = get_bool(model, "byte_fallback", false, where);
  ignore_merges_ = get_bool(model, "ignore_merges", false, where);

  const Json& vocab = require(model, "vocab", where);
  if (!vocab.is_object()) fail(ErrorCode::kCorrupt, where, ".vocab: expected an object");
  std::int64_t bound = 0;
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
        id.get<std::int64_t>() > 0x7ffffffe) {
      fail(ErrorCode::kCorrupt, where, ".vocab['", text,
           "']: id must be an integer in [0, 2^31-2]");
    }
    if (text.empty()) fail(ErrorCode::kCorrupt, where, ".vocab: empty token text");
    bound = std::max(bound, id.get<std::int64_t>() + 1);
  }
  texts_.resize(static_cast<std::size_t>(bound));
  for (const auto& [text, id] : vocab.items()) {
    std::string& slot = texts_[static_cast<std::size_t>(id.get<std::int64_t>())];
    if (!slot.empty()) {
      fail(ErrorCode::kCorrupt, where, ".vocab: duplicate id ", id.get<std::int64_t>(), " for '",
           slot, "' and '", text, "'");
    }
    slot = text;
  }
  table_.build(&texts_);
  for (std::int32_t id = 0; id < static_cast<std::int32_t>(texts_.size()); ++id) {
    if (!texts_[id].empty()) table_.insert(id);
  }

  const std::string unk = get_optional_string(model, "unk_token", where);
  if (!unk.empty()) {
    unk_id_ = table_.find(unk);
    if (unk_id_ < 0) fail(ErrorCode::kCorrupt, where, ".unk_token '", unk, "' is not in the vocab");
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_fallback_ids_[b] = table_.find(name);
    byte_level_ids_[b] = table_.find(byte_to_char(static_cast<std::uint8_t>(b)));
  }
  all_bytes_present_ = std::all_of(byte_level_ids_.begin(), byte_level_ids_.end(),
                                   [](std::int32_t id) { return id >= 0; });

  const Json& merges = require(model, "merges", where);
  if (!merges.is_array()) fail(ErrorCode::kCorrupt, where, ".merges: expected an array");
  merges_.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const auto [a, b] = parse_merge(merges[i], i, where);
    const std::int32_t ia = table_.find(a), ib = table_.find(b);
    const std::int32_t merged = table_.find(a + b);
    if (ia < 0 || ib < 0 || merged < 0) {
      fail(ErrorCode::kCorrupt, where, ".merges[", i, "] ('", a, "', '", b, "'): token '",
           ia < 0   ? a
           : ib < 0 ? b
                    : a + b,
           "' is not in the vocab");
    }
    merges_.insert(ia, ib, MergeValue{static_cast<std::int32_t>(i), merged});
  }
}

std::size_t BpeModel::max_word_bytes_per_token(bool byte_level) const {
  const auto all_present = [](const std::array<std::int32_t, 256>& ids) {
    return std::all_of(ids.begin(), ids.end(), [](std::int32_t id) { return id >= 0; });
  };
  // initial_symbols drops an unknown character, or fuses a run of them into one token,
  // unless every character is known (a byte-level word of a full byte alphabet), falls
  // back to byte tokens, or becomes its own unk_token (<= 4 bytes).
  const bool every_char_known = byte_level && all_bytes_present_;
  const bool every_char_a_token = every_char_known ||
                                  (byte_fallback_ && all_present(byte_fallback_ids_)) ||
                                  (unk_id_ >= 0 && !fuse_unk_);
  if (!every_char_a_token) return 0;
  // A token stands for its own text (merges and ignore_merges concatenate characters):
  // a byte-level character is one byte of the word and 1-2 bytes of text, a <0xNN> token
  // one byte and six, any other character itself. So its text's length bounds the word's
  // bytes it covers.
  std::size_t most = unk_id_ >= 0 ? 4 : 1;
  for (const std::string& t : texts_) most = std::max(most, t.size());
  return most;
}

void BpeModel::initial_symbols(std::string_view text, std::vector<std::int32_t>& syms) const {
  // Hugging Face's merge_word: one symbol per character; unknown characters become their
  // <0xNN> byte tokens (byte_fallback) or unk_token (fused if fuse_unk), or are dropped.
  std::int32_t pending_unk = -1;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t n = utf8_sequence_length(text, i);
    if (n == 0) n = 1;  // cannot happen for validated input; keep going byte by byte
    const std::string_view ch = text.substr(i, n);
    i += n;
    const std::int32_t id = table_.find(ch);
    if (id >= 0) {
      if (pending_unk >= 0) syms.push_back(pending_unk);
      pending_unk = -1;
      syms.push_back(id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (const char c : ch) all = all && byte_fallback_ids_[static_cast<std::uint8_t>(c)] >= 0;
      if (all) {
        for (const char c : ch) syms.push_back(byte_fallback_ids_[static_cast<std::uint8_t>(c)]);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (pending_unk >= 0 && !fuse_unk_) syms.push_back(pending_unk);
      pending_unk = unk_id_;
    }
  }
  if (pending_unk >= 0) syms.push_back(pending_unk);
}

void BpeModel::encode_word(std::string_view word, bool byte_level, std::vector<std::int32_t>& out,
                           std::vector<std::int32_t>& syms) const {
  if (word.empty()) return;
  std::string mapped;
  const bool need_text = ignore_merges_ || (byte_level && !all_bytes_present_);
  if (byte_level && need_text) mapped = bytes_to_byte_level(word);
  const std::string_view text = byte_level && need_text ? std::string_view(mapped) : word;
  if (ignore_merges_) {
    const std::int32_t id = table_.find(text);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  syms.clear();
  if (byte_level && all_bytes_present_) {
    for (const char c : word) syms.push_back(byte_level_ids_[static_cast<std::uint8_t>(c)]);
  } else {
    initial_symbols(text, syms);
  }
  if (syms.size() > 1) {
    if (syms.size() <= kSmallWord) {
      merge_small(syms);
    } else {
      merge_large(syms);
    }
  }
  out.insert(out.end(), syms.begin(), syms.end());
}

// Quadratic but cache-friendly: repeatedly merge the lowest-ranked adjacent pair (the
// leftmost on a tie). Pair ranks are recomputed only next to a merge.
void BpeModel::merge_small(std::vector<std::int32_t>& syms) const {
  std::int32_t ranks[kSmallWord];
  std::int32_t merged[kSmallWord];
  std::size_t n = syms.size();
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const MergeValue* m = merges_.find(syms[i], syms[i + 1]);
    ranks[i] = m ? m->rank : kNoRank;
    merged[i] = m ? m->merged : -1;
  }
  while (n > 1) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNoRank) break;
    syms[best] = merged[best];
    for (std::size_t i = best + 1; i + 1 < n; ++i) {
      syms[i] = syms[i + 1];
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    const auto update = [&](std::size_t i) {
      const MergeValue* m = merges_.find(syms[i], syms[i + 1]);
      ranks[i] = m ? m->rank : kNoRank;
      merged[i] = m ? m->merged : -1;
    };
    if (best > 0) update(best - 1);
    if (best + 1 < n) update(best);
  }
  syms.resize(n);
}

// Hugging Face's Word::merge_all: a min-heap of (rank, position) over a linked list, for
// long words where the quadratic scan would be slow.
void BpeModel::merge_large(std::vector<std::int32_t>& syms) const {
  struct Entry {
    std::int32_t rank;
    std::int32_t pos;
    std::int32_t merged;
    bool operator<(const Entry& o) const {  // min-heap on (rank, pos)
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const auto n = static_cast<std::int32_t>(syms.size());
  std::vector<std::int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  std::priority_queue<Entry> heap;
  for (std::int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
    if (i + 1 < n) {
      if (const MergeValue* m = merges_.find(syms[i], syms[i + 1])) {
        heap.push({m->rank, i, m->merged});
      }
    }
  }
  while (!heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    const std::int32_t p = top.pos;
    if (!alive[p] || next[p] < 0) continue;
    const std::int32_t q = next[p];
    const MergeValue* m = merges_.find(syms[p], syms[q]);
    if (m == nullptr || m->merged != top.merged) continue;  // stale entry
    syms[p] = top.merged;
    alive[q] = false;
    next[p] = next[q];
    if (next[q] >= 0) prev[next[q]] = p;
    if (prev[p] >= 0) {
      if (const MergeValue* l = merges_.find(syms[prev[p]], syms[p])) {
        heap.push({l->rank, prev[p], l->merged});
      }
    }
    if (next[p] >= 0) {
      if (const MergeValue* r = merges_.find(syms[p], syms[next[p]])) {
        heap.push({r->rank, p, r->merged});
      }
    }
  }
  std::size_t out = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    if (alive[i]) syms[out++] = syms[i];
  }
  syms.resize(out);
}

}  // namespace detinfer::tokenizer
