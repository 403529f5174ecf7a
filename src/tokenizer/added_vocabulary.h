// tokenizer.json "added_tokens": matched in the input before the model (leftmost-longest,
// as Hugging Face's Aho-Corasick matcher), with lstrip / rstrip / single_word / normalized.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/json_fields.h"

namespace detinfer::tokenizer {

struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
  // What is matched in the input and what decode() sees: the content, or for a
  // normalized token the normalizer's output of it (Hugging Face does both).
  std::string match_text;
};

// A part of a text: an added token (id >= 0) or text for the model (id < 0).
struct Segment {
  std::int32_t id;
  std::size_t begin;
  std::size_t end;
};

class AddedVocabulary {
 public:
  // `match_text`: what is searched for; for a normalized token Hugging Face searches the
  // normalizer's output of its content (e.g. "▁end" for "end" after Prepend("▁")).
  void add(AddedToken token, const std::string& match_text);
  const std::vector<AddedToken>& tokens() const { return tokens_; }

  // Splits `text` on the added tokens whose `normalized` flag equals `normalized`.
  void split(std::string_view text, bool normalized, std::vector<Segment>& out) const;

 private:
  struct Matcher {
    std::unordered_map<std::string, std::size_t> by_content;  // -> index in tokens_
    std::vector<std::size_t> lengths;                         // distinct, descending
    std::vector<std::size_t> match_length;                    // by index in tokens_
    std::array<bool, 256> first_byte{};
    void add(const std::string& content, std::size_t index);
    // Index of the longest token starting at text[i], or -1.
    std::int64_t longest_at(std::string_view text, std::size_t i) const;
  };
  std::vector<AddedToken> tokens_;
  Matcher matchers_[2];  // [normalized]
};

}  // namespace detinfer::tokenizer
