// Where chat templates come from (override file, chat_template.jinja, chat_template.json,
// tokenizer_config.json string or named list), the special tokens passed to templates,
// generation_config.json defaults and chat messages <-> JSON.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "chat/chat_messages.h"
#include "chat/generation_defaults.h"
#include "chat/template_source.h"
#include "detinfer/chat.h"
#include "detinfer/error.h"

namespace detinfer::chat {
namespace {

namespace fs = std::filesystem;

class TemplateSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("DETINFER_TEST_TMP");
    dir_ = fs::path(tmp != nullptr ? tmp : "/tmp") /
           ("chat-source-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  TemplateSource load(const std::string& override_path = "") {
    return load_template_source(dir_.string(), override_path);
  }
  fs::path dir_;
};

TEST_F(TemplateSourceTest, NoTemplateAnywhereIsEmpty) {
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  const TemplateSource s = load();
  EXPECT_TRUE(s.templates.empty());
  EXPECT_EQ(s.hash, Hash128{});
  EXPECT_EQ(s.special_tokens.dump(), R"({"eos_token":"</s>"})");
}

TEST_F(TemplateSourceTest, TokenizerConfigStringAndSpecialTokens) {
  write("tokenizer_config.json", R"({"chat_template": "{{ bos_token }}hi",
    "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>", "pad_token": null,
    "unk_token": "<unk>", "additional_special_tokens": ["<a>", {"content": "<b>"}]})");
  const TemplateSource s = load();
  ASSERT_EQ(s.templates.size(), 1u);
  EXPECT_EQ(s.templates.at("default"), "{{ bos_token }}hi");
  EXPECT_FALSE(s.named);
  EXPECT_TRUE(s.from_tokenizer_config);
  EXPECT_EQ(s.special_tokens.dump(), R"({"bos_token":"<s>","eos_token":"</s>","unk_token":"<unk>",)"
                                     R"("additional_special_tokens":["<a>","<b>"]})");
}

TEST_F(TemplateSourceTest, SpecialTokensMapIsOverriddenByTokenizerConfig) {
  write("special_tokens_map.json", R"({"bos_token": "<s>", "eos_token": "<old>"})");
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_EQ(load().special_tokens.dump(), R"({"bos_token":"<s>","eos_token":"</s>"})");
}

TEST_F(TemplateSourceTest, NamedTemplateList) {
  write("tokenizer_config.json", R"({"chat_template": [{"name": "default", "template": "d"},
    {"name": "tool_use", "template": "t"}]})");
  const TemplateSource s = load();
  EXPECT_TRUE(s.named);
  EXPECT_EQ(s.templates.at("default"), "d");
  EXPECT_EQ(s.templates.at("tool_use"), "t");
}

TEST_F(TemplateSourceTest, JinjaFileBeatsJsonFileBeatsTokenizerConfig) {
  write("tokenizer_config.json", R"({"chat_template": "from config"})");
  EXPECT_EQ(load().templates.at("default"), "from config");
  write("chat_template.json", R"({"chat_template": "from json"})");
  EXPECT_EQ(load().templates.at("default"), "from json");
  EXPECT_FALSE(load().from_tokenizer_config);
  write("chat_template.jinja", "from jinja\n");
  const TemplateSource s = load();
  EXPECT_EQ(s.templates.at("default"), "from jinja\n");
  EXPECT_EQ(s.origin, (dir_ / "chat_template.jinja").string());
}

TEST_F(TemplateSourceTest, OverridePathBeatsEverything) {
  write("chat_template.jinja", "model's");
  write("mine.jinja", "mine");
  write("mine.json", R"({"chat_template": [{"name": "default", "template": "j"}]})");
  EXPECT_EQ(load((dir_ / "mine.jinja").string()).templates.at("default"), "mine");
  EXPECT_EQ(load((dir_ / "mine.json").string()).templates.at("default"), "j");
  try {
    load((dir_ / "missing.jinja").string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(e.message().find("chat_template_path"), std::string::npos) << e.message();
  }
}

TEST_F(TemplateSourceTest, HashFollowsTheTemplateText) {
  write("chat_template.jinja", "a");
  const Hash128 a = load().hash;
  write("chat_template.jinja", "b");
  const Hash128 b = load().hash;
  EXPECT_NE(a, Hash128{});
  EXPECT_NE(a, b);
  write("chat_template.jinja", "a");
  EXPECT_EQ(load().hash, a);
}

TEST_F(TemplateSourceTest, MalformedFilesNameTheField) {
  write("tokenizer_config.json", R"({"chat_template": 3})");
  EXPECT_THROW(load(), Error);
  write("tokenizer_config.json", R"({"chat_template": [{"name": "x"}]})");
  try {
    load();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
    EXPECT_NE(e.message().find("chat_template[0]"), std::string::npos) << e.message();
  }
  write("tokenizer_config.json", R"({"bos_token": 5})");
  EXPECT_THROW(load(), Error);
  write("tokenizer_config.json", "{not json");
  EXPECT_THROW(load(), Error);
}

TEST(GenerationDefaults, AbsentFieldsKeepDetinferDefaults) {
  const GenerationDefaults d = parse_generation_defaults(R"({"eos_token_id": 2})", "g", 0);
  EXPECT_TRUE(d.fields.empty());
  EXPECT_EQ(d.config.temperature, GenerationConfig{}.temperature);
  EXPECT_EQ(d.config.max_new_tokens, GenerationConfig{}.max_new_tokens);
}

TEST(GenerationDefaults, FieldsApply) {
  const GenerationDefaults d = parse_generation_defaults(
      R"({"do_sample": true, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "min_p": 0.05,
          "repetition_penalty": 1.05, "max_new_tokens": 100, "max_length": 9})",
      "g", 0);
  EXPECT_FLOAT_EQ(d.config.temperature, 0.7f);
  EXPECT_FLOAT_EQ(d.config.top_p, 0.8f);
  EXPECT_EQ(d.config.top_k, 20);
  EXPECT_FLOAT_EQ(d.config.min_p, 0.05f);
  EXPECT_FLOAT_EQ(d.config.repetition_penalty, 1.05f);
  EXPECT_EQ(d.config.max_new_tokens, 100);
  EXPECT_EQ(d.fields, (std::vector<std::string>{"temperature", "top_p", "top_k", "min_p",
                                                "repetition_penalty", "max_new_tokens"}));
}

TEST(GenerationDefaults, DoSampleFalseIsGreedy) {
  EXPECT_EQ(parse_generation_defaults(R"({"do_sample": false, "temperature": 0.6})", "g", 0)
                .config.temperature,
            0.0f);
  // do_sample true without a temperature: transformers' 1.0.
  EXPECT_EQ(parse_generation_defaults(R"({"do_sample": true})", "g", 0).config.temperature, 1.0f);
  // No do_sample: the temperature as given (vLLM).
  EXPECT_FLOAT_EQ(parse_generation_defaults(R"({"temperature": 0.6})", "g", 0).config.temperature,
                  0.6f);
}

TEST(GenerationDefaults, MaxLengthIsCappedByTheContext) {
  EXPECT_EQ(parse_generation_defaults(R"({"max_length": 4096})", "g", 512).config.max_new_tokens,
            511);
  EXPECT_EQ(parse_generation_defaults(R"({"max_length": 40})", "g", 512).config.max_new_tokens, 40);
}

TEST(GenerationDefaults, MistypedFieldsAreCorrupt) {
  for (const char* bad : {R"({"temperature": "hot"})", R"({"top_k": 1.5})", R"({"do_sample": 1})",
                          R"([1])", "nope", R"({"top_k": -1})"}) {
    try {
      parse_generation_defaults(bad, "generation_config.json", 0);
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kCorrupt) << bad;
      EXPECT_NE(e.message().find("generation_config.json"), std::string::npos) << e.message();
    }
  }
}

TEST(ChatMessagesJson, RoundTripsEveryField) {
  const std::string text = R"([
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
     "name": "bob"},
    {"role": "assistant", "content": null, "reasoning_content": "hmm",
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
    {"role": "tool", "content": "42", "tool_call_id": "c1"}])";
  const std::vector<ChatMessage> m = chat_messages_from_json(text);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].content, "be brief");
  ASSERT_EQ(m[1].parts.size(), 2u);
  EXPECT_EQ(m[1].parts[1].text, "b");
  EXPECT_EQ(m[1].name, "bob");
  EXPECT_FALSE(m[2].content.has_value());
  EXPECT_EQ(m[2].reasoning_content, "hmm");
  ASSERT_EQ(m[2].tool_calls.size(), 1u);
  EXPECT_EQ(m[2].tool_calls[0].name, "f");
  EXPECT_EQ(m[2].tool_calls[0].arguments, "{\"x\": 1}");
  EXPECT_EQ(m[3].tool_call_id, "c1");
  const std::string back = chat_messages_to_json(m);
  const std::vector<ChatMessage> again = chat_messages_from_json(back);
  EXPECT_EQ(chat_messages_to_json(again), back);
}

TEST(ChatMessagesJson, TemplatesSeeParsedArguments) {
  ChatMessage m;
  m.role = "assistant";
  m.tool_calls.push_back({"", "function", "f", R"({"b": 2, "a": [1]})"});
  m.tool_calls.push_back({"", "function", "g", "not json"});
  const auto j = messages_to_template_json({m});
  EXPECT_EQ(j.dump(),
            R"([{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":)"
            R"({"name":"f","arguments":{"b":2,"a":[1]}}},{"type":"function","function":)"
            R"({"name":"g","arguments":"not json"}}]}])");
}

TEST(ChatMessagesJson, ErrorsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"role": "user"})", "messages"},
      {R"([{"content": "x"}])", "messages[0].role"},
      {R"([{"role": "user", "content": "x"}, {"role": 3}])", "messages[1].role"},
      {R"([{"role": "user", "content": 5}])", "messages[0].content"},
      {R"([{"role": "user", "content": [{"type": "image_url"}]}])", "messages[0].content[0].type"},
      {R"([{"role": "assistant", "tool_calls": [{"function": {}}]}])",
       "messages[0].tool_calls[0].function.name"},
      {R"([{"role": "tool", "tool_call_id": 1}])", "messages[0].tool_call_id"},
      {"[", "messages"}};
  for (const auto& [text, field] : cases) {
    try {
      chat_messages_from_json(text);
      FAIL() << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << text;
      EXPECT_EQ(e.field(), field) << text << ": " << e.message();
    }
  }
}

}  // namespace
}  // namespace detinfer::chat
