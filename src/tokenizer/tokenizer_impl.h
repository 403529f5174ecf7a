// Tokenizer::Impl: the parsed tokenizer.json pipeline (added tokens -> normalizer ->
// pre-tokenizer -> BPE model -> post-processor; decoder for the way back).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "detinfer/tokenizer.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace detinfer {

struct Tokenizer::Impl {
  std::unique_ptr<tokenizer::BpeModel> model;
  tokenizer::AddedVocabulary added;
  std::unordered_map<std::int32_t, std::size_t> added_by_id;  // id -> index in added.tokens()
  std::unordered_map<std::string, std::int32_t> added_by_content;
  std::unique_ptr<tokenizer::Normalizer> normalizer;
  std::unique_ptr<tokenizer::PreTokenizer> pre_tokenizer;
  tokenizer::PostProcessor post_processor;
  std::unique_ptr<tokenizer::Decoder> decoder;
  // ByteFallback judges a run of <0xNN> tokens as a whole, so a stream must hold the run
  // until a token of another kind closes it.
  bool decoder_byte_fallback = false;
  std::int64_t vocab_size = 0;
  std::size_t max_text_bytes_per_token = 0;  // Tokenizer::max_text_bytes_per_token()
  std::optional<std::int32_t> bos, eos;
  Hash128 hash;

  void encode_text(std::string_view text, bool at_start, std::vector<std::int32_t>& ids) const;
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens) const;
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const;
  // The token text decode() uses (a normalized added token in its normalized form).
  const std::string* token(std::int32_t id) const;
  // The token's text as written in tokenizer.json.
  const std::string* content(std::int32_t id) const;
  bool special(std::int32_t id) const;
};

}  // namespace detinfer
