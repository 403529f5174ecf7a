// The "BPE" model of tokenizer.json: vocabulary, ranked merges, unk_token, byte_fallback,
// fuse_unk and ignore_merges, applied to one pre-tokenized word exactly as Hugging Face's
// tokenizers does (lowest rank first; among equal ranks the leftmost pair).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_fields.h"
#include "tokenizer/lookup_tables.h"

namespace detinfer::tokenizer {

class BpeModel {
 public:
  // Parses tokenizer.json's "model" object. Throws kCorrupt (duplicate ids, merges naming
  // unknown tokens, ...) or kUnsupported (another model type, dropout, subword prefixes).
  BpeModel(const Json& model, const std::string& where);
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  // Appends the ids of one word. If `byte_level`, `word` holds raw bytes and the model's
  // input is their GPT-2 byte-level mapping (the ByteLevel pre-tokenizer, applied lazily).
  // `scratch` is working memory reused across calls.
  void encode_word(std::string_view word, bool byte_level, std::vector<std::int32_t>& out,
                   std::vector<std::int32_t>& scratch) const;

  // 1 + the largest id of the vocabulary (0 when empty).
  std::int64_t id_bound() const { return static_cast<std::int64_t>(texts_.size()); }
  // Token text of id, or nullptr for a hole in the id range.
  const std::string* token(std::int32_t id) const {
    return id >= 0 && id < static_cast<std::int32_t>(texts_.size()) && !texts_[id].empty()
               ? &texts_[id]
               : nullptr;
  }
  std::int32_t find(std::string_view text) const { return table_.find(text); }
  std::size_t num_merges() const { return merges_.size(); }
  // The most bytes of a pre-tokenized word that one token of encode_word can stand for, or
  // 0 when a run of them has no bound (characters dropped, or fused into one unk_token).
  // `byte_level`: the words come from the ByteLevel pre-tokenizer.
  std::size_t max_word_bytes_per_token(bool byte_level) const;

 private:
  void initial_symbols(std::string_view text, std::vector<std::int32_t>& syms) const;
  void merge_small(std::vector<std::int32_t>& syms) const;
  void merge_large(std::vector<std::int32_t>& syms) const;

  std::vector<std::string> texts_;  // id -> token text ("" = no such id)
  StringIdTable table_;
  PairTable merges_;
  std::int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::array<std::int32_t, 256> byte_fallback_ids_{};  // <0xNN> -> id, or -1
  std::array<std::int32_t, 256> byte_level_ids_{};     // raw byte -> id of its byte-level char
  bool all_bytes_present_ = false;
};

}  // namespace detinfer::tokenizer
