#include "tokenizer/tiny_tokenizer.h"

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "tokenizer/bpe_trainer.h"

namespace detinfer {

namespace {
constexpr std::int64_t kNumBytes = 256;
constexpr std::int64_t kNumSpecial = 3;
const char* const kSpecial[kNumSpecial] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

void check_vocab_size(std::int64_t vocab_size) {
  if (vocab_size < kNumBytes + kNumSpecial || vocab_size > 0x7fffffff) {
    fail(ErrorCode::kInvalidArgument, "tiny tokenizer vocab_size must be in [",
         kNumBytes + kNumSpecial, ", 2147483647], got ", vocab_size);
  }
}

tokenizer::TrainedBpe train(std::int64_t vocab_size) {
  tokenizer::BpeTrainerOptions opts;
  opts.num_merges = vocab_size - kNumBytes - kNumSpecial;
  opts.min_frequency = 2;
  return tokenizer::train_byte_level_bpe({tiny_corpus()}, opts);
}

nlohmann::ordered_json added_token(std::int64_t id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}
}  // namespace

TinySpecialIds tiny_special_ids(std::int64_t vocab_size) {
  check_vocab_size(vocab_size);
  const auto first = static_cast<std::int32_t>(kNumBytes + train(vocab_size).merges.size());
  return {first, first + 1, first + 2};
}

std::string make_tiny_tokenizer_json(std::int64_t vocab_size) {
  check_vocab_size(vocab_size);
  const tokenizer::TrainedBpe bpe = train(vocab_size);
  using json = nlohmann::ordered_json;

  json added = json::array();
  std::int64_t next = static_cast<std::int64_t>(bpe.vocab.size());
  for (const char* s : kSpecial) added.push_back(added_token(next++, s));
  for (std::int64_t r = 0; next < vocab_size; ++r) {
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
  split["pattern"]["Regex"] = std::string(tokenizer::kLlama3SplitPattern);
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

std::string make_tiny_tokenizer_config_json() {
  using json = nlohmann::ordered_json;
  json j;
  j["add_bos_token"] = false;
  j["add_eos_token"] = false;
  j["bos_token"] = nullptr;
  j["eos_token"] = "<|endoftext|>";
  j["pad_token"] = "<|endoftext|>";
  j["unk_token"] = nullptr;
  j["clean_up_tokenization_spaces"] = false;
  j["model_max_length"] = 32768;
  j["tokenizer_class"] = "PreTrainedTokenizerFast";
  j["chat_template"] =
      "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  return j.dump(2);
}

}  // namespace detinfer
