#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "tokenizer/unicode_props.h"

namespace detinfer::tokenizer {

void AddedVocabulary::Matcher::add(const std::string& content, std::size_t index) {
  if (content.empty()) return;  // an empty token never matches
  by_content[content] = index;
  if (match_length.size() <= index) match_length.resize(index + 1, 0);
  match_length[index] = content.size();
  first_byte[static_cast<std::uint8_t>(content[0])] = true;
  if (std::find(lengths.begin(), lengths.end(), content.size()) == lengths.end()) {
    lengths.push_back(content.size());
    std::sort(lengths.rbegin(), lengths.rend());
  }
}

std::int64_t AddedVocabulary::Matcher::longest_at(std::string_view text, std::size_t i) const {
  if (!first_byte[static_cast<std::uint8_t>(text[i])]) return -1;
  for (const std::size_t len : lengths) {
    if (i + len > text.size()) continue;
    const auto it = by_content.find(std::string(text.substr(i, len)));
    if (it != by_content.end()) return static_cast<std::int64_t>(it->second);
  }
  return -1;
}

void AddedVocabulary::add(AddedToken token, const std::string& match_text) {
  const std::size_t index = tokens_.size();
  matchers_[token.normalized ? 1 : 0].add(match_text, index);
  token.match_text = match_text;
  tokens_.push_back(std::move(token));
}

void AddedVocabulary::split(std::string_view text, bool normalized,
                            std::vector<Segment>& out) const {
  const Matcher& m = matchers_[normalized ? 1 : 0];
  std::size_t start_offset = 0;
  std::size_t i = 0;
  if (!m.by_content.empty()) {
    while (i < text.size()) {
      const std::int64_t k = m.longest_at(text, i);
      if (k < 0) {
        ++i;
        continue;
      }
      const AddedToken& t = tokens_[static_cast<std::size_t>(k)];
      std::size_t start = i, stop = i + m.match_length[static_cast<std::size_t>(k)];
      i = stop;  // matching resumes after this match even if it is discarded
      if (t.single_word) {
        const bool start_space = start == 0 || !ends_with_word_char(text.substr(0, start));
        const bool stop_space = stop == text.size() || !starts_with_word_char(text.substr(stop));
        if (!start_space || !stop_space) continue;
      }
      if (t.lstrip)
        start = std::max(trailing_whitespace_start(text.substr(0, start)), start_offset);
      if (t.rstrip) stop += leading_whitespace_bytes(text.substr(stop));
      if (start_offset < start) out.push_back({-1, start_offset, start});
      out.push_back({t.id, start, stop});
      start_offset = stop;
      i = stop;
    }
  }
  if (start_offset != text.size()) out.push_back({-1, start_offset, text.size()});
}

}  // namespace detinfer::tokenizer
