// The inverse of model/gguf_tokenizer.h, as llama.cpp's converter does it: a Hugging Face
// tokenizer.json (+ tokenizer_config.json) written as GGUF tokenizer metadata
// (tokenizer.ggml.*, tokenizer.chat_template*). Used by the tests and by the tiny-model
// tools to write GGUF files that carry a tokenizer (docs/gguf.md, "Tokenizers").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "devtools/gguf_writer.h"

namespace detinfer::devtools {

struct GgufTokenizerSource {
  std::string_view tokenizer_json;
  std::string_view tokenizer_config_json;  // "" = none
  // tokenizer.ggml.pre of a byte-level tokenizer (llama.cpp's name for its pre-tokenizer,
  // e.g. "llama-bpe", "qwen2"); unused for a SentencePiece-style one.
  std::string pre;
  // The model's BOS and stop ids (config.json's bos_token_id and eos_token_id list) when
  // given: tokenizer.ggml.bos_token_id, then eos_token_id, eot_token_id, eom_token_id (at
  // most 3). Unset/empty: the tokenizer's own bos_token/eos_token and what its
  // post-processor adds.
  std::optional<std::int32_t> bos_token_id{};
  std::vector<std::int32_t> eos_token_ids{};
};

// Writes the tokenizer as "gpt2" (a ByteLevel decoder) or "llama" (BPE with byte_fallback)
// metadata. Only what GGUF can carry is accepted: Error(kUnsupported) naming the component
// when the normalizer, pre-tokenizer or ignore_merges differ from what `pre` stands for
// (byte-level), when the normalizer is not SentencePiece's legacy Prepend + Replace or a
// pre-tokenizer is set (SentencePiece-style; Metaspace is not GGUF's), when the merges
// are not the ones the scores written for them imply, when ids have holes, or when the
// post-processor adds more than one token before or after the text. Added tokens lose
// lstrip/rstrip/single_word/normalized (see gguf_lossy_added_tokens).
void add_gguf_tokenizer(GgufWriter& w, const GgufTokenizerSource& src);

// The contents of the added tokens whose flags GGUF cannot carry: lstrip, rstrip or
// single_word set, or normalized when the tokenizer has a normalizer (so matched after
// normalizing). A text holding none of them tokenizes the same after the round trip.
std::vector<std::string> gguf_lossy_added_tokens(std::string_view tokenizer_json);

// The tiny tokenizer of make-tiny-model (devtools/tiny_tokenizer.h) with its
// tokenizer_config.json (ChatML template), as tokenizer.ggml.pre "smaug-bpe" (Llama 3's
// split without ignore_merges).
void add_tiny_gguf_tokenizer(GgufWriter& w, std::int64_t vocab_size);

}  // namespace detinfer::devtools
