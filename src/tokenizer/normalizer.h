// tokenizer.json "normalizer": Sequence, Prepend, Replace, NFC, Strip. Anything else is
// rejected with Error(kUnsupported) naming it.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/json_fields.h"

namespace detinfer::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites one segment of text (a part between added tokens), in place.
  virtual void apply(std::string& text) const = 0;
};

// nullptr for a null normalizer.
std::unique_ptr<Normalizer> make_normalizer(const Json& j, const std::string& where);

}  // namespace detinfer::tokenizer
