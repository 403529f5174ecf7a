// tokenizer.ggml.pre names as Hugging Face normalizers and pre-tokenizers (docs/gguf.md,
// "Tokenizers").
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/check.h"
#include "model/gguf_tokenizer.h"

namespace detinfer::model {

namespace {
using Json = nlohmann::json;

// The word splits of the table: Hugging Face's Split/ByteLevel/Digits pre-tokenizers that
// give the words llama.cpp's regexes give for the same name.
enum class Words { kGpt2, kLlama3, kQwen2, kSmolLm, kDefault };

// One row per tokenizer.ggml.pre name. nfc: the normalizer of the model family's
// tokenizer.json (Qwen2/2.5/3 apply NFC; llama.cpp does not).
struct PreRow {
  const char* name;
  Words words;
  bool nfc;
  bool ignore_merges;
  bool add_bos_default;
};

constexpr PreRow kPreTable[] = {
    {"default", Words::kDefault, false, false, false},
    {"llama3", Words::kLlama3, false, true, true},
    {"llama-v3", Words::kLlama3, false, true, true},
    {"llama-bpe", Words::kLlama3, false, true, true},
    {"dbrx", Words::kLlama3, false, false, false},
    {"smaug-bpe", Words::kLlama3, false, false, false},
    {"qwen2", Words::kQwen2, true, false, false},
    {"gpt-2", Words::kGpt2, false, false, false},
    {"phi-2", Words::kGpt2, false, false, false},
    {"olmo", Words::kGpt2, false, false, false},
    {"smollm", Words::kSmolLm, false, false, false},
};

// Llama 3's regex (tokenizer.json's spelling; digits in groups of 1-3) and Qwen2's (single
// digits).
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// llama.cpp's "default" BPE split: four regexes, each isolating its matches inside the
// pieces of the previous one.
constexpr const char* kDefaultRegexes[] = {
    R"([\p{P}\$\+<=>\^~\|]+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
    R"(\p{N}+)",
    R"([0-9][0-9][0-9])",
};

Json byte_level(bool add_prefix_space, bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

Json split(const char* regex) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", regex}}},
          {"behavior", "Isolated"},
          {"invert", false}};
}

Json sequence(Json list) { return {{"type", "Sequence"}, {"pretokenizers", std::move(list)}}; }

Json words_json(Words w, bool aps) {
  switch (w) {
    case Words::kGpt2:
      return byte_level(aps, true);
    case Words::kLlama3:
      return sequence({split(kLlama3Regex), byte_level(aps, false)});
    case Words::kQwen2:
      return sequence({split(kQwen2Regex), byte_level(aps, false)});
    case Words::kSmolLm:
      return sequence({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(aps, true)});
    case Words::kDefault: {
      Json list = Json::array();
      for (const char* r : kDefaultRegexes) list.push_back(split(r));
      list.push_back(byte_level(aps, false));
      return sequence(std::move(list));
    }
  }
  DETINFER_INTERNAL_CHECK(false);
  return {};
}

}  // namespace

GgufPreTokenizer gguf_pre_tokenizer(const std::string& name, bool add_prefix_space) {
  for (const PreRow& row : kPreTable) {
    if (name != row.name) continue;
    GgufPreTokenizer p;
    p.normalizer_json = row.nfc ? Json{{"type", "NFC"}}.dump() : "null";
    p.pre_tokenizer_json = words_json(row.words, add_prefix_space).dump();
    p.ignore_merges = row.ignore_merges;
    p.add_bos_default = row.add_bos_default;
    return p;
  }
  throw Error(ErrorCode::kUnsupported,
              str_cat("GGUF metadata 'tokenizer.ggml.pre' is '", name,
                      "', a pre-tokenizer detinfer does not map (docs/gguf.md lists the names)"),
              "tokenizer.ggml.pre");
}

std::vector<std::string> gguf_pre_tokenizer_names() {
  std::vector<std::string> names;
  for (const PreRow& row : kPreTable) names.emplace_back(row.name);
  return names;
}

}  // namespace detinfer::model
