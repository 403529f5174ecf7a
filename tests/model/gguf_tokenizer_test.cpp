// Tokenizers from GGUF metadata (model/gguf_tokenizer.h): every tokenizer.json fixture that
// GGUF can represent, written as GGUF metadata (devtools/gguf_tokenizer_writer.h) and read
// back, gives Hugging Face's own ids and decodes (the fixtures' .cases.json) and the same
// tokens as the tokenizer.json path; each tokenizer.ggml.pre name splits as documented.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "detinfer/error.h"
#include "devtools/tiny_tokenizer.h"
#include "gguf_tokenizer_support.h"

namespace detinfer::model {
namespace {

using testing::gguf_of;
using testing::read_tokenizer_fixture;
using Json = nlohmann::json;

bool holds_any(const std::string& text, const std::vector<std::string>& tokens) {
  for (const std::string& t : tokens) {
    if (text.find(t) != std::string::npos) return true;
  }
  return false;
}

// Same vocabulary, special flags, BOS/EOS-free ids and decodes for every id.
void expect_same_vocab(const Tokenizer& g, const Tokenizer& hf) {
  ASSERT_EQ(g.vocab_size(), hf.vocab_size());
  for (std::int32_t id = 0; id < g.vocab_size(); ++id) {
    EXPECT_EQ(g.id_to_token(id), hf.id_to_token(id)) << id;
    EXPECT_EQ(g.is_special(id), hf.is_special(id)) << id;
    EXPECT_EQ(g.decode({id}), hf.decode({id})) << id;
  }
}

// The fixture through GGUF against Hugging Face's cases; returns the cases checked.
std::size_t check_fixture(const std::string& name, const std::string& pre) {
  const std::string json = read_tokenizer_fixture(name + ".json");
  const Json cases = Json::parse(read_tokenizer_fixture(name + ".cases.json"));
  const Tokenizer hf = Tokenizer::from_json(json);
  const Tokenizer g = gguf_tokenizer(gguf_of(json, "", pre));
  expect_same_vocab(g, hf);
  const std::vector<std::string> lossy = devtools::gguf_lossy_added_tokens(json);
  std::size_t checked = 0, differ = 0;
  for (const Json& c : cases) {
    const std::string text = c["text"].get<std::string>();
    if (holds_any(text, lossy)) {  // flags GGUF cannot carry (docs/gguf.md)
      differ += g.encode(text, true) != c["ids"].get<std::vector<std::int32_t>>();
      continue;
    }
    const auto ids = c["ids"].get<std::vector<std::int32_t>>();
    EXPECT_EQ(g.encode(text, true), ids) << name << ": " << text;
    EXPECT_EQ(g.encode(text, false), c["ids_no_special"].get<std::vector<std::int32_t>>())
        << name << ": " << text;
    EXPECT_EQ(g.decode(ids), c["decoded"].get<std::string>()) << name << ": " << text;
    EXPECT_EQ(g.decode(ids, true), c["decoded_skip"].get<std::string>()) << name << ": " << text;
    ++checked;
  }
  EXPECT_GE(checked * 4, cases.size() * 3) << name;  // lossy tokens are in few cases
  // The flags GGUF drops (lstrip, rstrip, single_word, normalized) do change those texts.
  EXPECT_GT(differ, 0u) << name;
  return checked;
}

TEST(GgufTokenizer, ByteLevelLlama3SplitIsSmaugBpe) { check_fixture("byte_level", "smaug-bpe"); }
TEST(GgufTokenizer, ByteLevelLlama3SplitIsDbrx) { check_fixture("byte_level", "dbrx"); }
TEST(GgufTokenizer, IgnoreMergesIsLlamaBpe) {
  check_fixture("byte_level_ignore_merges", "llama-bpe");
}
TEST(GgufTokenizer, NfcAndSingleDigitsIsQwen2) { check_fixture("byte_level_nfc", "qwen2"); }
TEST(GgufTokenizer, Gpt2StyleIsGpt2WithSpacePrefix) { check_fixture("gpt2_style", "gpt-2"); }
TEST(GgufTokenizer, SentencePieceIsLlama) { check_fixture("sentencepiece", ""); }

TEST(GgufTokenizer, LossyAddedTokensAreTheOnesWithFlags) {
  EXPECT_EQ(devtools::gguf_lossy_added_tokens(read_tokenizer_fixture("byte_level.json")),
            (std::vector<std::string>{"<|eot_id|>", "<mask>", "<sw>"}));
  EXPECT_EQ(devtools::gguf_lossy_added_tokens(read_tokenizer_fixture("sentencepiece.json")),
            (std::vector<std::string>{"end"}));
}

TEST(GgufTokenizer, SentencePieceMetadataIsLlamaStyle) {
  const GgufFile f = gguf_of(read_tokenizer_fixture("sentencepiece.json"), "", "");
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.find("tokenizer.ggml.merges"), nullptr);
  const auto& types = f.get_array("tokenizer.ggml.token_type", GgufType::kI32).ints;
  EXPECT_EQ(types[0], 2);    // <unk>: UNKNOWN
  EXPECT_EQ(types[1], 3);    // <s>: CONTROL
  EXPECT_EQ(types[3], 6);    // <0x00>: BYTE
  EXPECT_EQ(types[294], 1);  // ▁t: NORMAL
  EXPECT_EQ(types[311], 4);  // "end": USER_DEFINED
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_eos_token"));
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_space_prefix"));
  const Tokenizer g = gguf_tokenizer(f);
  EXPECT_EQ(g.bos_token_id(), 1);
  EXPECT_EQ(g.eos_token_id(), 2);
  GgufFile defaults = f;  // llama.cpp's defaults for llama vocabularies: BOS 1, EOS 2, unk 0
  for (const char* k : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                        "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.add_bos_token"}) {
    defaults.metadata.erase(k);
  }
  EXPECT_EQ(gguf_tokenizer_json(defaults).tokenizer_json, gguf_tokenizer_json(f).tokenizer_json);
  EXPECT_EQ(gguf_tokenizer(defaults).encode("Hello", true), g.encode("Hello", true));
  EXPECT_EQ(gguf_tokenizer(defaults).eos_token_id(), 2);
  // Without the space prefix the first word has no "▁" and decoding keeps the text.
  GgufFile no_prefix = f;
  no_prefix.metadata["tokenizer.ggml.add_space_prefix"] = testing::bool_value(false);
  const Tokenizer h = gguf_tokenizer(no_prefix);
  const auto ids = h.encode("Hello world", false);
  EXPECT_EQ(h.id_to_token(ids.front()), "H");
  EXPECT_EQ(h.decode(ids), "Hello world");
  EXPECT_EQ(g.id_to_token(g.encode("Hello world", false).front()), "\xE2\x96\x81Hello");
}

TEST(GgufTokenizer, TinyTokenizerRoundTrips) {
  const std::int64_t vocab = 512;
  const std::string json = devtools::make_tiny_tokenizer_json(vocab);
  const std::string cfg = devtools::make_tiny_tokenizer_config_json();
  devtools::GgufWriter w;
  devtools::add_tiny_gguf_tokenizer(w, vocab);
  const GgufFile f = testing::parse_bytes(w.bytes());
  const Tokenizer hf = Tokenizer::from_json(json, cfg);
  const Tokenizer g = gguf_tokenizer(f);
  expect_same_vocab(g, hf);
  EXPECT_EQ(g.eos_token_id(), hf.eos_token_id());
  EXPECT_EQ(g.bos_token_id(), std::nullopt);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.padding_token_id"),
            static_cast<std::uint64_t>(devtools::tiny_special_ids(vocab).endoftext));
  std::vector<std::string> texts = {
      "<|im_start|>user\nHello, world! 12345 it's<|im_end|>\n<|im_start|>assistant\n",
      "  leading spaces\n\n\ttabs and  double  spaces 3.14159 ",
      "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x99\x82 <|endoftext|><|reserved_3|>"};
  const std::string corpus(devtools::tiny_corpus());
  for (std::size_t at = 0; at < corpus.size() && texts.size() < 200;) {  // whole lines
    const std::size_t end = std::min(corpus.find('\n', at), corpus.size());
    texts.push_back(corpus.substr(at, end - at + 1));
    at = end + 1;
  }
  for (const std::string& t : texts) {
    const auto ids = hf.encode(t, true);
    ASSERT_EQ(g.encode(t, true), ids) << t;
    EXPECT_EQ(g.decode(ids), hf.decode(ids));
    EXPECT_EQ(g.decode(ids, true), hf.decode(ids, true));
  }
  const Json config = Json::parse(cfg);
  EXPECT_EQ(gguf_chat_template(f), config["chat_template"].get<std::string>());
}

TEST(GgufTokenizer, SameMetadataSameTokenizerHash) {
  const GgufFile f = gguf_of(read_tokenizer_fixture("byte_level.json"), "", "smaug-bpe");
  EXPECT_EQ(gguf_tokenizer(f).hash(), gguf_tokenizer(f).hash());
  EXPECT_EQ(gguf_tokenizer_json(f).tokenizer_json, gguf_tokenizer_json(f).tokenizer_json);
  GgufFile other = f;
  other.metadata["tokenizer.ggml.pre"] = testing::string_value("dbrx");
  EXPECT_EQ(gguf_tokenizer(other).hash(), gguf_tokenizer(f).hash());  // the same split
  other.metadata["tokenizer.ggml.pre"] = testing::string_value("qwen2");
  EXPECT_NE(gguf_tokenizer(other).hash(), gguf_tokenizer(f).hash());
}

}  // namespace
}  // namespace detinfer::model

namespace detinfer::model {
namespace {

// The Qwen2.5-0.5B-shaped tiny tokenizer (151,936 ids, 150,821 of them reserved special
// tokens) through GGUF: the same vocabulary and ids.
TEST(GgufTokenizer, TinyTokenizerAtQwenScale) {
  const std::int64_t vocab = 151936;
  devtools::GgufWriter w;
  devtools::add_tiny_gguf_tokenizer(w, vocab);
  const GgufFile f = testing::parse_bytes(w.bytes());
  const Tokenizer g = gguf_tokenizer(f);
  const Tokenizer hf = Tokenizer::from_json(devtools::make_tiny_tokenizer_json(vocab),
                                            devtools::make_tiny_tokenizer_config_json());
  ASSERT_EQ(g.vocab_size(), vocab);
  for (std::int32_t id = 0; id < vocab; id += 997) EXPECT_EQ(g.id_to_token(id), hf.id_to_token(id));
  const std::string text =
      "<|im_start|>user\nHow many <|reserved_150000|> tokens? 151936.<|im_end|>";
  EXPECT_EQ(g.encode(text), hf.encode(text));
  EXPECT_EQ(g.hash(), gguf_tokenizer(f).hash());
}

}  // namespace
}  // namespace detinfer::model

namespace detinfer::model {
namespace {

// transformers' Llama classes: add_bos_token / add_eos_token of tokenizer_config.json become
// tokenizer.ggml.add_bos_token / add_eos_token, and the GGUF tokenizer adds both.
TEST(GgufTokenizer, AddBosAndEosFromTheConfig) {
  const std::string json = read_tokenizer_fixture("sentencepiece.json");
  const std::string cfg = R"({"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": true,
      "add_eos_token": true, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})";
  const GgufFile f = gguf_of(json, cfg, "");
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_eos_token"));
  const Tokenizer hf = Tokenizer::from_json(json, cfg);
  const Tokenizer g = gguf_tokenizer(f);
  for (const char* text : {"Hello world", "", " Hello  the world."}) {
    EXPECT_EQ(g.encode(text, true), hf.encode(text, true)) << text;
  }
  EXPECT_EQ(g.encode("Hello world", true).back(), 2);
  EXPECT_EQ(g.encode("Hello world", true).front(), 1);

  // Two tokens before the text is more than GGUF's add_bos_token can say.
  Json two = Json::parse(json);
  Json bos = Json::object();
  bos["SpecialToken"] = {{"id", "<s>"}, {"type_id", 0}};
  two["post_processor"]["single"].insert(two["post_processor"]["single"].begin(), bos);
  ASSERT_EQ(Tokenizer::from_json(two.dump()).encode("", true), (std::vector<std::int32_t>{1, 1}));
  try {
    gguf_of(two.dump(), "", "");
    ADD_FAILURE() << "a post-processor adding two BOS was written";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(e.field(), "tokenizer.json: post_processor");
  }
}

}  // namespace
}  // namespace detinfer::model
