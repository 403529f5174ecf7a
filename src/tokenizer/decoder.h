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

}  // namespace detinfer::tokenizer
