// tokenizer.json "pre_tokenizer": Sequence, Split, ByteLevel, Metaspace, Digits. Anything
// else is rejected with Error(kUnsupported) naming it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_fields.h"

namespace detinfer::tokenizer {

// The words of one text segment, as byte ranges of `buf`.
struct Pieces {
  struct Span {
    std::uint32_t begin;
    std::uint32_t end;
    bool at_start;  // starts at offset 0 of the original input (Metaspace "first")
  };
  std::string buf;
  std::vector<Span> spans;
  // ByteLevel has been applied but not materialized: the model maps the bytes itself.
  bool byte_level_pending = false;

  std::string_view text(const Span& s) const {
    return std::string_view(buf).substr(s.begin, s.end - s.begin);
  }
  // Applies a pending ByteLevel mapping to buf.
  void materialize();
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void apply(Pieces& pieces) const = 0;
  // False when apply() may drop bytes of the text (a Split with behavior "Removed").
  virtual bool keeps_every_byte() const { return true; }
  // True when apply() maps the text to GPT-2's byte-level characters (ByteLevel).
  virtual bool byte_level() const { return false; }
};

// nullptr for a null pre_tokenizer.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const std::string& where);

}  // namespace detinfer::tokenizer
