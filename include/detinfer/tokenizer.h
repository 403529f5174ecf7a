// Hugging Face tokenizer.json (BPE: byte-level and SentencePiece-style) in C++.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "detinfer/export.h"
#include "detinfer/hash.h"

namespace detinfer {

class DETINFER_API Tokenizer {
 public:
  // Loads a tokenizer.json file, or a folder holding tokenizer.json and optionally
  // tokenizer_config.json. Throws Error (kNotFound, kCorrupt, kUnsupported naming the
  // component) on failure; never tokenizes differently from Hugging Face silently.
  static Tokenizer load(const std::string& path);
  // From in-memory JSON texts (tokenizer_config may be empty).
  static Tokenizer from_json(std::string_view tokenizer_json,
                             std::string_view tokenizer_config_json = {});

  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // `text` must be UTF-8: anything else throws Error(kInvalidArgument) naming the byte
  // offset. add_special_tokens applies the post-processor (BOS/EOS template).
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Throws Error(kInvalidArgument) for an id outside [0, vocab_size()); an id inside the
  // range that names no token is skipped (as Hugging Face does). See docs/tokenizer.md.
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens = false) const;

  // 1 + the largest id of the vocabulary and the added tokens.
  std::int64_t vocab_size() const;
  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(std::int32_t id) const;
  std::optional<std::int32_t> bos_token_id() const;
  std::optional<std::int32_t> eos_token_id() const;
  bool is_special(std::int32_t id) const;

  // The most bytes of a text that one token of encode(text) can stand for, or 0 when there
  // is no such bound (a normalizer, which may compose or delete text; a pre-tokenizer that
  // removes matches; added tokens that strip the whitespace beside them; unknown
  // characters that are dropped or fused). With a bound B > 0, encode(text) has at least
  // ceil(text.size() / B) tokens besides the special tokens it adds: a text can be
  // rejected as too long before it is tokenized (docs/tokenizer.md).
  std::size_t max_text_bytes_per_token() const;

  // XXH3-128 of the canonicalized tokenizer.json and relevant tokenizer_config fields.
  const Hash128& hash() const;

  // Streaming decode: feed ids one at a time; each call returns the text that became
  // complete (never a partial UTF-8 sequence). The concatenation of all pieces plus
  // flush() equals decode(all ids); after flush() the decoder starts a new stream.
  // push() throws Error(kInvalidArgument) for an out-of-range id.
  class DETINFER_API StreamDecoder {
   public:
    ~StreamDecoder();
    StreamDecoder(StreamDecoder&&) noexcept;
    StreamDecoder& operator=(StreamDecoder&&) noexcept;
    std::string push(std::int32_t id);
    std::string flush();

   private:
    friend class Tokenizer;
    struct DETINFER_LOCAL Impl;
    explicit StreamDecoder(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
  };
  StreamDecoder stream_decoder(bool skip_special_tokens = false) const;

  struct DETINFER_LOCAL Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace detinfer
