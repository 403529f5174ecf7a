// tokenizer.json "post_processor" for single sequences: TemplateProcessing, ByteLevel
// (nothing to do for ids), RobertaProcessing, BertProcessing and Sequence of these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/json_fields.h"

namespace detinfer::tokenizer {

class PostProcessor {
 public:
  // A processor that adds nothing.
  PostProcessor() = default;
  PostProcessor(const Json& j, const std::string& where);
  // A template "prefix $A suffix".
  static PostProcessor from_ids(std::vector<std::int32_t> prefix, std::vector<std::int32_t> suffix);

  // Wraps `ids` (add_special_tokens == true).
  void apply(std::vector<std::int32_t>& ids) const;
  bool adds(std::int32_t id) const;

 private:
  void parse(const Json& j, const std::string& where);
  std::vector<std::int32_t> prefix_;
  std::vector<std::int32_t> suffix_;
};

}  // namespace detinfer::tokenizer
