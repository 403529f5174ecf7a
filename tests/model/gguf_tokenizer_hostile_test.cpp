// Hostile tokenizer metadata: each a clear detinfer::Error with the expected code and the
// offending key as its field; the writer's refusals of what GGUF cannot represent; chat
// templates and sampling defaults.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "detinfer/error.h"
#include "gguf_tokenizer_support.h"

namespace detinfer::model {
namespace {

using testing::gguf_of;
using testing::read_tokenizer_fixture;
using testing::string_value;
using testing::uint_value;

GgufFile byte_level() { return gguf_of(read_tokenizer_fixture("byte_level.json"), "", "dbrx"); }
GgufFile spm() { return gguf_of(read_tokenizer_fixture("sentencepiece.json"), "", ""); }

void expect_error(const GgufFile& f, ErrorCode code, const std::string& field,
                  const std::string& says) {
  try {
    gguf_tokenizer(f);
    ADD_FAILURE() << "accepted; expected an error on " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

struct Hostile {
  const char* name;
  std::function<GgufFile()> make;
  ErrorCode code;
  std::string field;
  std::string says;
};

GgufFile edit(GgufFile f, const std::function<void(GgufFile&)>& change) {
  change(f);
  return f;
}

std::vector<std::string>& tokens(GgufFile& f) {
  return f.metadata["tokenizer.ggml.tokens"].strings;
}

std::vector<Hostile> model_cases() {
  using E = ErrorCode;
  const std::string types = "tokenizer.ggml.token_type";
  return {
      {"no tokens",
       [] {
         return edit(byte_level(), [](GgufFile& f) { f.metadata.erase("tokenizer.ggml.tokens"); });
       },
       E::kNotFound, "tokenizer.ggml.tokens", "missing"},
      {"no model",
       [] {
         return edit(byte_level(), [](GgufFile& f) { f.metadata.erase("tokenizer.ggml.model"); });
       },
       E::kNotFound, "tokenizer.ggml.model", "missing"},
      {"bert",
       [] {
         return edit(byte_level(), [](GgufFile& f) {
           f.metadata["tokenizer.ggml.model"] = string_value("bert");
         });
       },
       E::kUnsupported, "tokenizer.ggml.model", "'bert'"},
      {"t5",
       [] {
         return edit(spm(),
                     [](GgufFile& f) { f.metadata["tokenizer.ggml.model"] = string_value("t5"); });
       },
       E::kUnsupported, "tokenizer.ggml.model", "'t5'"},
      {"unknown pre",
       [] {
         return edit(byte_level(), [](GgufFile& f) {
           f.metadata["tokenizer.ggml.pre"] = string_value("tekken");
         });
       },
       E::kUnsupported, "tokenizer.ggml.pre", "'tekken'"},
      {"no pre",
       [] {
         return edit(byte_level(), [](GgufFile& f) { f.metadata.erase("tokenizer.ggml.pre"); });
       },
       E::kNotFound, "tokenizer.ggml.pre", "missing"},
      {"duplicate token",
       [] { return edit(byte_level(), [](GgufFile& f) { tokens(f)[40] = tokens(f)[41]; }); },
       E::kCorrupt, "tokenizer.ggml.tokens", "[41] 'J' repeats token 40"},
      {"empty token", [] { return edit(spm(), [](GgufFile& f) { tokens(f)[300].clear(); }); },
       E::kCorrupt, "tokenizer.ggml.tokens", "[300] is empty"},
      {"no tokens at all", [] { return edit(spm(), [](GgufFile& f) { tokens(f).clear(); }); },
       E::kCorrupt, "tokenizer.ggml.tokens", "is empty"},
      {"tokens as numbers",
       [=] {
         return edit(spm(),
                     [=](GgufFile& f) { f.metadata["tokenizer.ggml.tokens"] = f.metadata[types]; });
       },
       E::kCorrupt, "tokenizer.ggml.tokens", "tokenizer.ggml.tokens"},
  };
}

std::vector<Hostile> array_cases() {
  using E = ErrorCode;
  const std::string types = "tokenizer.ggml.token_type";
  return {
      {"no merges",
       [] {
         return edit(byte_level(), [](GgufFile& f) { f.metadata.erase("tokenizer.ggml.merges"); });
       },
       E::kNotFound, "tokenizer.ggml.merges", "missing"},
      {"merge of unknown token",
       [] {
         return edit(byte_level(), [](GgufFile& f) {
           f.metadata["tokenizer.ggml.merges"].strings[0] = "\xC4\xA0 zzz";
         });
       },
       E::kCorrupt, "tokenizer.ggml.merges", "'zzz', not a token"},
      {"merge making no token",
       [] {
         return edit(byte_level(),
                     [](GgufFile& f) { f.metadata["tokenizer.ggml.merges"].strings[0] = "x y"; });
       },
       E::kCorrupt, "tokenizer.ggml.merges", "'xy', not a token"},
      {"merge without space",
       [] {
         return edit(byte_level(),
                     [](GgufFile& f) { f.metadata["tokenizer.ggml.merges"].strings[0] = "he"; });
       },
       E::kCorrupt, "tokenizer.ggml.merges", "two tokens"},
      {"merge naming a special token",
       [] {
         return edit(byte_level(), [](GgufFile& f) {
           f.metadata["tokenizer.ggml.merges"].strings[0] = "<|end_of_text|> h";
         });
       },
       E::kCorrupt, "tokenizer.ggml.merges", "not a token"},
      {"types too short",
       [=] { return edit(byte_level(), [=](GgufFile& f) { f.metadata[types].ints.pop_back(); }); },
       E::kCorrupt, types, "entries for"},
      {"type 0",
       [=] { return edit(byte_level(), [=](GgufFile& f) { f.metadata[types].ints[5] = 0; }); },
       E::kCorrupt, types, "[5] is 0, not a token type"},
      {"type 7",
       [=] { return edit(byte_level(), [=](GgufFile& f) { f.metadata[types].ints[9] = 7; }); },
       E::kCorrupt, types, "[9] is 7"},
      {"types as strings",
       [=] {
         return edit(byte_level(),
                     [=](GgufFile& f) { f.metadata[types] = f.metadata["tokenizer.ggml.tokens"]; });
       },
       E::kCorrupt, types, "not an array of integers"},
      {"BYTE type on a word",
       [=] { return edit(spm(), [=](GgufFile& f) { f.metadata[types].ints[294] = 6; }); },
       E::kCorrupt, types, "not <0xNN>"},
      {"scores too long",
       [] {
         return edit(
             spm(), [](GgufFile& f) { f.metadata["tokenizer.ggml.scores"].floats.push_back(0.0); });
       },
       E::kCorrupt, "tokenizer.ggml.scores", "entries for"},
      {"NaN score",
       [] {
         return edit(spm(), [](GgufFile& f) {
           f.metadata["tokenizer.ggml.scores"].floats[7] = std::nan("");
         });
       },
       E::kCorrupt, "tokenizer.ggml.scores", "[7] is not finite"},
      {"no scores",
       [] { return edit(spm(), [](GgufFile& f) { f.metadata.erase("tokenizer.ggml.scores"); }); },
       E::kNotFound, "tokenizer.ggml.scores", "missing"},
  };
}

std::vector<Hostile> id_cases() {
  using E = ErrorCode;
  return {
      {"bos beyond vocab",
       [] {
         return edit(byte_level(), [](GgufFile& f) {
           f.metadata["tokenizer.ggml.bos_token_id"] = uint_value(290);
         });
       },
       E::kCorrupt, "tokenizer.ggml.bos_token_id", "290, outside the vocabulary of 290"},
      {"eos beyond vocab",
       [] {
         return edit(spm(), [](GgufFile& f) {
           f.metadata["tokenizer.ggml.eos_token_id"] = uint_value(1u << 31);
         });
       },
       E::kCorrupt, "tokenizer.ggml.eos_token_id", "outside the vocabulary"},
      {"pad beyond vocab",
       [] {
         return edit(spm(), [](GgufFile& f) {
           f.metadata["tokenizer.ggml.padding_token_id"] = uint_value(312);
         });
       },
       E::kCorrupt, "tokenizer.ggml.padding_token_id", "outside"},
      {"unk beyond vocab",
       [] {
         return edit(spm(), [](GgufFile& f) {
           f.metadata["tokenizer.ggml.unknown_token_id"] = uint_value(999);
         });
       },
       E::kCorrupt, "tokenizer.ggml.unknown_token_id", "outside"},
      {"add_bos without bos",
       [] {
         return edit(byte_level(),
                     [](GgufFile& f) { f.metadata.erase("tokenizer.ggml.bos_token_id"); });
       },
       E::kCorrupt, "tokenizer.ggml.add_bos_token", "no bos_token_id"},
  };
}

TEST(GgufTokenizerHostile, EachIsAClearErrorNamingTheKey) {
  std::vector<Hostile> cases = model_cases();
  for (auto more : {array_cases(), id_cases()}) cases.insert(cases.end(), more.begin(), more.end());
  EXPECT_EQ(cases.size(), 28u);
  for (const Hostile& h : cases) {
    SCOPED_TRACE(h.name);
    expect_error(h.make(), h.code, h.field, h.says);
  }
}

void expect_refused(const std::string& fixture, const std::string& pre,
                    const std::string& component) {
  try {
    gguf_of(read_tokenizer_fixture(fixture + ".json"), "", pre);
    ADD_FAILURE() << fixture << " written with pre '" << pre << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
    EXPECT_EQ(e.field(), "tokenizer.json: " + component) << e.what();
  }
}

void expect_refused_json(const nlohmann::json& j, const std::string& component) {
  try {
    gguf_of(j.dump(), "", "");
    ADD_FAILURE() << "written: " << component;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
    EXPECT_EQ(e.field(), "tokenizer.json: " + component) << e.what();
  }
}

// SentencePiece-style: merges that the scores cannot imply, and ids with holes.
TEST(GgufTokenizerWriter, RefusesMergesTheScoresCannotImplyAndHoles) {
  const auto spm = nlohmann::json::parse(read_tokenizer_fixture("sentencepiece.json"));
  nlohmann::json extra = spm;  // "ab" is a token no merge makes: GGUF would merge "a b"
  extra["model"]["vocab"]["ab"] = 312;
  ASSERT_EQ(Tokenizer::from_json(extra.dump()).encode("ab", false).size(), 3u);  // ▁ a b
  expect_refused_json(extra, "model.merges");
  nlohmann::json hole = spm;  // id 288 ("W") removed
  hole["model"]["vocab"].erase("W");
  expect_refused_json(hole, "model.vocab");
}

TEST(GgufTokenizerWriter, RefusesWhatGgufCannotCarry) {
  expect_refused("split_behaviors", "smaug-bpe", "normalizer");
  expect_refused("byte_level_nfc", "smaug-bpe", "normalizer");
  expect_refused("byte_level", "qwen2", "normalizer");
  expect_refused("byte_level", "gpt-2", "pre_tokenizer");
  expect_refused("byte_level_ignore_merges", "dbrx", "model.ignore_merges");
  expect_refused("byte_level", "llama-bpe", "model.ignore_merges");
  expect_refused("sentencepiece_metaspace", "", "normalizer");
  expect_refused("sentencepiece_metaspace_split", "", "normalizer");
}

TEST(GgufChatMetadata, TemplatesPlainAndNamed) {
  const std::string json = read_tokenizer_fixture("byte_level.json");
  const nlohmann::json plain = {{"chat_template", "{{ messages }}"}};
  GgufFile f = gguf_of(json, plain.dump(), "dbrx");
  EXPECT_EQ(gguf_chat_template(f), "{{ messages }}");
  GgufChatTemplates t = gguf_chat_templates(f);
  EXPECT_FALSE(t.named);
  EXPECT_EQ(t.templates, (std::map<std::string, std::string>{{"default", "{{ messages }}"}}));

  const nlohmann::json named = {
      {"chat_template",
       {{{"name", "default"}, {"template", "D"}}, {{"name", "tool_use"}, {"template", "T"}}}}};
  f = gguf_of(json, named.dump(), "dbrx");
  EXPECT_EQ(f.get_string("tokenizer.chat_template.tool_use"), "T");
  t = gguf_chat_templates(f);
  EXPECT_TRUE(t.named);
  EXPECT_EQ(t.templates, (std::map<std::string, std::string>{{"default", "D"}, {"tool_use", "T"}}));

  f.metadata.erase("tokenizer.chat_template.tool_use");
  try {
    gguf_chat_templates(f);
    ADD_FAILURE() << "a listed template that is missing was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
    EXPECT_EQ(e.field(), "tokenizer.chat_template.tool_use");
  }
  // The equivalent tokenizer_config.json carries the templates, so the hash covers them.
  const GgufFile named_file = gguf_of(json, named.dump(), "dbrx");
  const nlohmann::json cfg =
      nlohmann::json::parse(gguf_tokenizer_json(named_file).tokenizer_config_json);
  EXPECT_EQ(cfg["chat_template"], nlohmann::json::parse(R"([{"name": "default", "template": "D"},
                                                            {"name": "tool_use", "template": "T"}])"));
  EXPECT_NE(gguf_tokenizer(named_file).hash(),
            gguf_tokenizer(gguf_of(json, plain.dump(), "dbrx")).hash());
  EXPECT_NE(gguf_tokenizer(gguf_of(json, "", "dbrx")).hash(),
            gguf_tokenizer(gguf_of(json, plain.dump(), "dbrx")).hash());
  EXPECT_EQ(gguf_chat_template(gguf_of(json, "", "dbrx")), std::nullopt);
  EXPECT_TRUE(gguf_chat_templates(gguf_of(json, "", "dbrx")).templates.empty());
}

TEST(GgufChatMetadata, SamplingDefaultsAsGenerationConfig) {
  GgufFile f = byte_level();
  EXPECT_EQ(gguf_generation_config_json(f), std::nullopt);
  devtools::GgufWriter w;
  w.add_f32("general.sampling.temp", 0.5f);
  w.add_i32("general.sampling.top_k", -1);
  w.add_f32("general.sampling.top_p", 0.75f);
  w.add_f32("general.sampling.penalty_repeat", 1.25f);
  w.add_u32("general.sampling.mirostat", 2);
  const GgufFile s = testing::parse_bytes(w.bytes());
  const auto j = nlohmann::json::parse(gguf_generation_config_json(s).value());
  EXPECT_EQ(
      j, (nlohmann::json{
             {"temperature", 0.5}, {"top_k", 0}, {"top_p", 0.75}, {"repetition_penalty", 1.25}}));
  devtools::GgufWriter bad;
  bad.add_string("general.sampling.temp", "hot");
  try {
    gguf_generation_config_json(testing::parse_bytes(bad.bytes()));
    ADD_FAILURE() << "a string temperature was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
    EXPECT_EQ(e.field(), "general.sampling.temp");
  }
}

TEST(GgufChatMetadata, StopTokensAreEosEotEom) {
  GgufFile f = byte_level();
  f.metadata["tokenizer.ggml.eos_token_id"] = uint_value(285);
  EXPECT_EQ(gguf_stop_token_ids(f), (std::vector<std::int32_t>{285}));
  f.metadata["tokenizer.ggml.eot_token_id"] = uint_value(286);
  f.metadata["tokenizer.ggml.eom_token_id"] = uint_value(285);
  EXPECT_EQ(gguf_stop_token_ids(f), (std::vector<std::int32_t>{285, 286}));
  f.metadata["tokenizer.ggml.eom_token_id"] = uint_value(290);
  try {
    gguf_stop_token_ids(f);
    ADD_FAILURE() << "an eom id beyond the vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
    EXPECT_EQ(e.field(), "tokenizer.ggml.eom_token_id");
  }
}

}  // namespace
}  // namespace detinfer::model

namespace detinfer::model {
namespace {

// Byte flips anywhere in two small tokenizer files (every byte, three flip
// patterns): each file either parses and loads, or fails with a detinfer::Error — never
// another exception or a crash.
TEST(GgufTokenizerHostile, ByteFlipsLoadOrFailCleanly) {
  for (const char* fixture : {"sentencepiece", "byte_level"}) {
    devtools::GgufWriter w;
    devtools::add_gguf_tokenizer(
        w, {read_tokenizer_fixture(std::string(fixture) + ".json"), "", "dbrx"});
    const std::vector<std::uint8_t> good = w.bytes();
    std::size_t loaded = 0, refused = 0;
    for (std::size_t at = 0; at < good.size(); ++at) {
      for (const std::uint8_t mask : {0x01, 0x80, 0xFF}) {
        std::vector<std::uint8_t> b = good;
        b[at] ^= mask;
        try {
          gguf_tokenizer(testing::parse_bytes(b)).encode("Hello world, 123 caf\xC3\xA9!");
          ++loaded;
        } catch (const Error&) {
          ++refused;
        }
      }
    }
    EXPECT_GT(loaded, 0u) << fixture;  // flips inside token texts or scores may still load
    EXPECT_GT(refused, 0u) << fixture;
  }
}

}  // namespace
}  // namespace detinfer::model
