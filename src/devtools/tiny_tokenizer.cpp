#include "devtools/tiny_tokenizer.h"

#include <iterator>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "devtools/bpe_trainer.h"

namespace detinfer::devtools {

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

TrainedBpe train(std::int64_t vocab_size) {
  BpeTrainerOptions opts;
  opts.num_merges = vocab_size - kNumBytes - kNumSpecial;
  opts.min_frequency = 2;
  return train_byte_level_bpe({tiny_corpus()}, opts);
}

}  // namespace

TinySpecialIds tiny_special_ids(std::int64_t vocab_size) {
  check_vocab_size(vocab_size);
  const auto first = static_cast<std::int32_t>(kNumBytes + train(vocab_size).merges.size());
  return {first, first + 1, first + 2};
}

std::string make_tiny_tokenizer_json(std::int64_t vocab_size) {
  check_vocab_size(vocab_size);
  ByteLevelJsonOptions opts;
  opts.special_tokens.assign(std::begin(kSpecial), std::end(kSpecial));
  opts.vocab_size = vocab_size;
  return byte_level_tokenizer_json(train(vocab_size), opts);
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

}  // namespace detinfer::devtools
