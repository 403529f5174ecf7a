// A deterministic byte-level BPE trainer: pre-tokenizes with a split regex (as the
// tokenizer will at encode time), then repeatedly merges the most frequent adjacent pair.
// Ties go to the pair with the smaller (left id, right id), so the result is a pure
// function of the text and the options.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace detinfer::devtools {

// Llama-3's split pattern: contractions, letters with one leading non-letter, digits in
// groups of 1-3, punctuation runs, newlines, whitespace.
extern const char kLlama3SplitPattern[];

struct BpeTrainerOptions {
  std::int64_t num_merges = 256;   // stop after this many merges
  std::int64_t min_frequency = 2;  // stop when the best pair occurs fewer times than this
  std::string split_pattern = kLlama3SplitPattern;
};

struct TrainedBpe {
  // Token text (byte-level alphabet) by id: ids 0..255 are the bytes in GPT-2 order
  // (byte_level_order()), then one token per merge.
  std::vector<std::string> vocab;
  // Merges in rank order, as (left, right) token texts.
  std::vector<std::pair<std::string, std::string>> merges;
};

// Trains on the concatenation of `texts` (each pre-tokenized separately). Texts must be
// valid UTF-8 (throws Error(kInvalidArgument) otherwise).
TrainedBpe train_byte_level_bpe(const std::vector<std::string_view>& texts,
                                const BpeTrainerOptions& options);

// A Hugging Face tokenizer.json for a trained byte-level BPE: Split(split_pattern) +
// ByteLevel pre-tokenizer, ByteLevel decoder, string-form merges; special_tokens become
// special added tokens after the merges, then <|reserved_N|> up to vocab_size ids.
struct ByteLevelJsonOptions {
  std::vector<std::string> special_tokens;
  std::int64_t vocab_size = 0;  // pad to this many ids (no padding when smaller)
  std::string split_pattern = kLlama3SplitPattern;
};
std::string byte_level_tokenizer_json(const TrainedBpe& bpe, const ByteLevelJsonOptions& opts);

}  // namespace detinfer::devtools
