#include <nlohmann/json.hpp>

#include "devtools/bpe_trainer.h"

namespace detinfer::devtools {

namespace {
nlohmann::ordered_json added_token(std::int64_t id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}
}  // namespace

std::string byte_level_tokenizer_json(const TrainedBpe& bpe, const ByteLevelJsonOptions& opts) {
  using json = nlohmann::ordered_json;

  json added = json::array();
  std::int64_t next = static_cast<std::int64_t>(bpe.vocab.size());
  for (const std::string& s : opts.special_tokens) added.push_back(added_token(next++, s));
  for (std::int64_t r = 0; next < opts.vocab_size; ++r) {
    added.push_back(added_token(next++, "<|reserved_" + std::to_string(r) + "|>"));
  }

  json vocab = json::object();
  for (std::size_t id = 0; id < bpe.vocab.size(); ++id) vocab[bpe.vocab[id]] = id;
  json merges = json::array();
  for (const auto& [l, r] : bpe.merges) merges.push_back(l + " " + r);

  json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = std::move(added);
  j["normalizer"] = nullptr;
  json split;
  split["type"] = "Split";
  split["pattern"]["Regex"] = opts.split_pattern;
  split["behavior"] = "Isolated";
  split["invert"] = false;
  json byte_level;
  byte_level["type"] = "ByteLevel";
  byte_level["add_prefix_space"] = false;
  byte_level["trim_offsets"] = true;
  byte_level["use_regex"] = false;
  j["pre_tokenizer"]["type"] = "Sequence";
  j["pre_tokenizer"]["pretokenizers"] = json::array();
  j["pre_tokenizer"]["pretokenizers"].push_back(std::move(split));
  j["pre_tokenizer"]["pretokenizers"].push_back(std::move(byte_level));
  j["post_processor"] = {{"type", "ByteLevel"},
                         {"add_prefix_space", true},
                         {"trim_offsets", false},
                         {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"},
                  {"add_prefix_space", true},
                  {"trim_offsets", true},
                  {"use_regex", true}};
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", std::move(vocab)},
                {"merges", std::move(merges)}};
  return j.dump(2);
}

}  // namespace detinfer::devtools
