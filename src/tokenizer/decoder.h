// tokenizer.json "decoder": ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip and
// Sequence, with Hugging Face's decode_chain semantics (token list in, token list out).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_fields.h"

namespace detinfer::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// nullptr for a null decoder (tokens are then joined with spaces).
std::unique_ptr<Decoder> make_decoder(const Json& j, const std::string& where);

// Whether the decoder (or a step of it) is ByteFallback.
bool has_byte_fallback(const Json& j);
// Whether ByteFallback reads `token` as a byte ("<0xNN>").
bool is_byte_fallback_token(const std::string& token);

}  // namespace detinfer::tokenizer
