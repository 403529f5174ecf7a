// The tokenizer that ships with generated tiny models (`detinfer make-tiny-model`): a
// Qwen2/Llama-3 style byte-level BPE trained by detinfer's own trainer on the text in
// data/tiny_corpus.txt (written for this project), padded with reserved tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace detinfer::devtools {

// The text the tiny tokenizer is trained on (data/tiny_corpus.txt, embedded at build time).
std::string_view tiny_corpus();

// A Hugging Face tokenizer.json with exactly `vocab_size` ids:
//   0..255                 the 256 bytes (GPT-2 byte-level alphabet and order)
//   256..                  one token per merge (at most vocab_size - 259 merges, fewer if
//                          the corpus runs out of pairs seen twice)
//   next 3                 <|endoftext|>, <|im_start|>, <|im_end|> (special added tokens)
//   rest                   <|reserved_0|>, <|reserved_1|>, ... (special added tokens)
// Pre-tokenizer: Split with Llama-3's regex (digits in groups of 1-3) + ByteLevel;
// decoder ByteLevel; no normalizer. The same vocab_size always gives the same bytes.
// Throws Error(kInvalidArgument) if vocab_size < 259 or > 2^31 - 1.
std::string make_tiny_tokenizer_json(std::int64_t vocab_size);

// The matching tokenizer_config.json (Qwen2 style): no BOS, eos_token and pad_token
// "<|endoftext|>", a ChatML chat_template.
std::string make_tiny_tokenizer_config_json();

// Ids of the special tokens in a tiny tokenizer of the given vocab_size.
struct TinySpecialIds {
  std::int32_t endoftext;
  std::int32_t im_start;
  std::int32_t im_end;
};
TinySpecialIds tiny_special_ids(std::int64_t vocab_size);

}  // namespace detinfer::devtools
