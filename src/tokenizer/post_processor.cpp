#include "tokenizer/post_processor.h"

#include <algorithm>

namespace detinfer::tokenizer {

namespace {
std::int32_t pair_id(const Json& j, const char* key, const std::string& where) {
  const Json& v = require(j, key, where);
  if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer()) {
    fail(ErrorCode::kCorrupt, where, ".", key, ": expected [\"token\", id]");
  }
  return v[1].get<std::int32_t>();
}
}  // namespace

PostProcessor::PostProcessor(const Json& j, const std::string& where) { parse(j, where); }

PostProcessor PostProcessor::from_ids(std::vector<std::int32_t> prefix,
                                      std::vector<std::int32_t> suffix) {
  PostProcessor p;
  p.prefix_ = std::move(prefix);
  p.suffix_ = std::move(suffix);
  return p;
}

void PostProcessor::parse(const Json& j, const std::string& where) {
  if (j.is_null()) return;
  const std::string type = component_type(j, where);
  if (type == "ByteLevel") return;  // only adjusts offsets
  if (type == "Sequence") {
    const Json& list = require(j, "processors", where);
    if (!list.is_array()) fail(ErrorCode::kCorrupt, where, ".processors: expected an array");
    for (std::size_t i = 0; i < list.size(); ++i) {
      // Each processor wraps the result of the previous one.
      PostProcessor inner(list[i], where + ".processors[" + std::to_string(i) + "]");
      prefix_.insert(prefix_.begin(), inner.prefix_.begin(), inner.prefix_.end());
      suffix_.insert(suffix_.end(), inner.suffix_.begin(), inner.suffix_.end());
    }
    return;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    prefix_.push_back(pair_id(j, "cls", where));
    suffix_.push_back(pair_id(j, "sep", where));
    return;
  }
  if (type != "TemplateProcessing") unsupported(where, "post_processor '" + type + "'");
  const Json& single = require(j, "single", where);
  const Json& specials = require(j, "special_tokens", where);
  if (!single.is_array()) fail(ErrorCode::kCorrupt, where, ".single: expected an array");
  bool seen_a = false;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const Json& piece = single[i];
    const std::string at = where + ".single[" + std::to_string(i) + "]";
    if (piece.contains("Sequence")) {
      const std::string id = get_string(piece["Sequence"], "id", at + ".Sequence");
      if (id != "A" || seen_a)
        unsupported(at, "template sequence '" + id + "' in a single template");
      seen_a = true;
      continue;
    }
    if (!piece.contains("SpecialToken")) {
      fail(ErrorCode::kCorrupt, at, ": expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
    const std::string name = get_string(piece["SpecialToken"], "id", at + ".SpecialToken");
    const Json& st = require(specials, name.c_str(), where + ".special_tokens");
    const Json& ids = require(st, "ids", where + ".special_tokens." + name);
    if (!ids.is_array())
      fail(ErrorCode::kCorrupt, where, ".special_tokens.", name, ".ids: expected an array");
    for (const Json& id : ids) {
      if (!id.is_number_integer())
        fail(ErrorCode::kCorrupt, where, ".special_tokens.", name, ".ids: expected integers");
      (seen_a ? suffix_ : prefix_).push_back(id.get<std::int32_t>());
    }
  }
  if (!seen_a) fail(ErrorCode::kCorrupt, where, ".single: the template has no $A");
}

void PostProcessor::apply(std::vector<std::int32_t>& ids) const {
  if (!prefix_.empty()) ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
  ids.insert(ids.end(), suffix_.begin(), suffix_.end());
}

bool PostProcessor::adds(std::int32_t id) const {
  return std::find(prefix_.begin(), prefix_.end(), id) != prefix_.end() ||
         std::find(suffix_.begin(), suffix_.end(), id) != suffix_.end();
}

}  // namespace detinfer::tokenizer
