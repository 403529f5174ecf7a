// The tokenizer, chat templates and sampling defaults that a GGUF file carries in its
// metadata (docs/gguf.md, "Tokenizers"). The tokenizer is rebuilt as the equivalent
// Hugging Face tokenizer.json and loaded by Tokenizer::from_json, so splitting, merging,
// added tokens and decoding are the ones verified against Hugging Face.
//
// Mapped: tokenizer.ggml.model "gpt2" (byte-level BPE: tokens, merges, token_type, the
// pre-tokenizer named by tokenizer.ggml.pre) and "llama" (SentencePiece-style BPE: tokens,
// scores, token_type with <0xNN> byte tokens, "▁" for spaces, add_space_prefix). Anything
// else is Error(kUnsupported) naming the key and the value; malformed metadata (array
// lengths that differ, ids out of range, merges naming unknown tokens, duplicate tokens,
// unknown token types) is Error(kCorrupt) naming the key.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "detinfer/tokenizer.h"
#include "model/gguf.h"

namespace detinfer::model {

// tokenizer.ggml.token_type values (llama.cpp's numbering).
enum class GgufTokenType : std::int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // special added token (never split, skipped by skip_special_tokens)
  kUserDefined = 4,  // added token that is not special
  kUnused = 5,
  kByte = 6,  // <0xNN> byte-fallback token
};

// What a tokenizer.ggml.pre name stands for: the Hugging Face normalizer and
// pre-tokenizer (JSON texts, "null" when there is none), whether whole words found in the
// vocabulary skip the merges (ignore_merges), and whether BOS is added when the file has
// no tokenizer.ggml.add_bos_token. add_prefix_space is tokenizer.ggml.add_space_prefix.
struct GgufPreTokenizer {
  std::string normalizer_json;
  std::string pre_tokenizer_json;
  bool ignore_merges = false;
  bool add_bos_default = false;
};
// Error(kUnsupported) naming tokenizer.ggml.pre and `name` for a name not in the table.
GgufPreTokenizer gguf_pre_tokenizer(const std::string& name, bool add_prefix_space);
// The names the table maps, in table order.
std::vector<std::string> gguf_pre_tokenizer_names();

// The SentencePiece-style vocabulary's merges ("left right" pairs of token texts) that
// `scores` imply, in rank order: every split of a token into two tokens of the
// vocabulary, in the order of transformers' SentencePiece converter as we read it (higher
// score of the merged token first, then the longer left piece, the longer right piece,
// the lower merged id, the lower left and right ids). Scores must be finite
// (kInvalidArgument); more than 128 MiB of merges is Error(kCorrupt) naming
// tokenizer.ggml.tokens. `in_vocab[i]` says whether token i takes
// part (added tokens do not).
std::vector<std::pair<std::string, std::string>> gguf_spm_merges(
    const std::vector<std::string>& tokens, const std::vector<double>& scores,
    const std::vector<bool>& in_vocab);

// The equivalent tokenizer.json and tokenizer_config.json texts (deterministic: the same
// metadata gives the same bytes, and so the same Tokenizer::hash()). The config holds
// bos_token, eos_token, unk_token, pad_token (token texts or null), add_bos_token,
// add_eos_token and the chat template(s) of gguf_chat_templates ("chat_template": a string,
// or a list of {"name", "template"} when named), as a model folder's tokenizer_config.json
// would: the tokenizer hash covers the templates.
struct GgufTokenizerJson {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
};
GgufTokenizerJson gguf_tokenizer_json(const GgufFile& file);

// The file's tokenizer (gguf_tokenizer_json loaded by Tokenizer::from_json).
Tokenizer gguf_tokenizer(const GgufFile& file);

// tokenizer.chat_template and its named variants (tokenizer.chat_template.<name>, listed
// by tokenizer.chat_templates), in the form of chat::TemplateSource: one unnamed template
// is "default" with named = false; named ones add their names (named = true, "default"
// being tokenizer.chat_template when present). Empty templates when there is none.
struct GgufChatTemplates {
  std::map<std::string, std::string> templates;
  bool named = false;
};
GgufChatTemplates gguf_chat_templates(const GgufFile& file);
// Just tokenizer.chat_template (nullopt when absent).
std::optional<std::string> gguf_chat_template(const GgufFile& file);

// The sampling defaults of general.sampling.* (the keys llama.cpp's converter writes from
// generation_config.json: temp, top_p, top_k, min_p, penalty_repeat) as a
// generation_config.json text for chat::parse_generation_defaults; nullopt when the file
// has none of them. Other general.sampling keys (mirostat, xtc, penalty_last_n) have no
// detinfer field and are ignored.
std::optional<std::string> gguf_generation_config_json(const GgufFile& file);

// The ids that end generation: tokenizer.ggml.eos_token_id, eot_token_id (end of turn) and
// eom_token_id (end of message), in that order without repeats (llama.cpp stops on all
// three; a Hugging Face generation_config.json lists them as eos_token_id). Ids outside
// tokenizer.ggml.tokens are Error(kCorrupt) naming the key.
std::vector<std::int32_t> gguf_stop_token_ids(const GgufFile& file);

}  // namespace detinfer::model
