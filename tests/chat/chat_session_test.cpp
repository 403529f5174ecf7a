// DeterministicSession's chat API on the tiny model: templates from the model folder and
// the override path, rendering with tools / extra variables / fixed time, errors, the
// template in the tokenizer hash and fingerprint, generation_config.json defaults, and a
// 3-turn text conversation bitwise equal with the prefix cache off, cold and warm.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "detinfer/chat.h"
#include "detinfer/error.h"
#include "detinfer/session.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

namespace fs = std::filesystem;
using testing::tiny_model_dir;
using testing::tiny_options;

// A copy of the tiny model folder that a test may change.
std::string model_copy(const std::string& name) {
  const char* tmp = std::getenv("DETINFER_TEST_TMP");
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") /
                       ("chat-model-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(tiny_model_dir())) {
    fs::copy_file(e.path(), dir / e.path().filename());
  }
  return dir.string();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::vector<ChatMessage> conversation() {
  return {{"system", "You are terse."}, {"user", "Hi there"}};
}

ErrorCode code_of(const std::function<void()>& f, std::string* field = nullptr,
                  std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (field != nullptr) *field = e.field();
    if (message != nullptr) *message = e.message();
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return ErrorCode::kInternal;
}

TEST(ChatSession, TinyModelChatMlTemplate) {
  auto s = DeterministicSession::open(tiny_model_dir(), tiny_options());
  ASSERT_TRUE(s.has_chat_template());
  const std::string body =
      "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n";
  EXPECT_EQ(s.apply_chat_template(conversation()), body + "<|im_start|>assistant\n");
  ChatTemplateOptions o;
  o.add_generation_prompt = false;
  EXPECT_EQ(s.apply_chat_template(conversation(), o), body);
}

TEST(ChatSession, EncodeChatKeepsSpecialTokensAndAddsNone) {
  auto s = DeterministicSession::open(tiny_model_dir(), tiny_options());
  const std::vector<std::int32_t> ids = s.encode_chat(conversation());
  EXPECT_EQ(ids, s.tokenizer()->encode(s.apply_chat_template(conversation()), false));
  const auto im_start = s.tokenizer()->token_to_id("<|im_start|>");
  ASSERT_TRUE(im_start.has_value());
  EXPECT_EQ(ids.front(), *im_start);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), *im_start), 3);
}

// Issue 33: a conversation whose rendered text has context * B bytes or more (B: the
// tokenizer's max_text_bytes_per_token) is refused before it is tokenized, soundly: that
// text really has context tokens or more. One byte less is tokenized as before.
TEST(ChatSession, AConversationTooLongByItsBytesIsRefusedBeforeTokenizing) {
  auto s = DeterministicSession::open(tiny_model_dir(), tiny_options());
  const auto per_token = static_cast<std::int64_t>(s.tokenizer()->max_text_bytes_per_token());
  ASSERT_GT(per_token, 0);
  const std::int64_t limit = s.context_length() * per_token;  // refused from here on
  const auto frame = static_cast<std::int64_t>(s.apply_chat_template({{"user", ""}}).size());
  std::string content(static_cast<std::size_t>(limit - frame), 'a');
  const std::string rendered = s.apply_chat_template({{"user", content}});
  ASSERT_EQ(static_cast<std::int64_t>(rendered.size()), limit);
  std::string message;
  EXPECT_EQ(code_of(
                [&] {
                  s.encode_chat({{"user", content}});
                },
                nullptr, &message),
            ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("bytes of prompt text"), std::string::npos) << message;
  EXPECT_GE(static_cast<std::int64_t>(s.tokenizer()->encode(rendered, false).size()),
            s.context_length());
  content.pop_back();
  EXPECT_EQ(s.encode_chat({{"user", content}}),
            s.tokenizer()->encode(s.apply_chat_template({{"user", content}}), false));
}

TEST(ChatSession, ChatIsGenerateOnTheRenderedIds) {
  auto s = DeterministicSession::open(tiny_model_dir(), tiny_options());
  GenerationConfig c = s.default_generation_config();
  c.max_new_tokens = 12;
  c.temperature = 0.8f;
  c.seed = 5;
  const GenerationResult a = s.chat(conversation(), c);
  const GenerationResult b = s.generate(s.encode_chat(conversation()), c);
  EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
  EXPECT_EQ(a.sequences[0].tokens, b.sequences[0].tokens);
  EXPECT_EQ(a.sequences[0].digest, b.sequences[0].digest);
  std::string streamed;
  s.chat(conversation(), c, {}, [&](const TokenEvent& e) {
    streamed += e.text;
    return true;
  });
  EXPECT_EQ(streamed, a.sequences[0].text);
}

TEST(ChatSession, TemplateFileOverridesAndEntersTheTokenizerHash) {
  const std::string dir = model_copy("jinja-file");
  auto plain = DeterministicSession::open(dir, tiny_options());
  write(dir + "/chat_template.jinja",
        "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}");
  auto with_file = DeterministicSession::open(dir, tiny_options());
  EXPECT_EQ(with_file.apply_chat_template(conversation()),
            "[system] You are terse.\n[user] Hi there\n");
  EXPECT_NE(with_file.tokenizer_hash(), plain.tokenizer_hash());
  GenerationConfig c;
  c.max_new_tokens = 2;
  const GenerationResult r = with_file.chat(conversation(), c);
  EXPECT_NE(r.fingerprint_json.find(with_file.tokenizer_hash()), std::string::npos);
  EXPECT_EQ(r.fingerprint_json.find(plain.tokenizer_hash()), std::string::npos);

  write(dir + "/mine.json", R"({"chat_template": "{{ messages | length }} {{ eos_token }}"})");
  SessionOptions o = tiny_options();
  o.chat_template_path = dir + "/mine.json";
  auto overridden = DeterministicSession::open(dir, o);
  EXPECT_EQ(overridden.apply_chat_template(conversation()), "2 <|endoftext|>");
  EXPECT_NE(overridden.tokenizer_hash(), with_file.tokenizer_hash());
  // The same template text from tokenizer_config.json is covered by the tokenizer hash.
  auto reopened = DeterministicSession::open(model_copy("jinja-file-2"), tiny_options());
  EXPECT_EQ(reopened.tokenizer_hash(), plain.tokenizer_hash());
}

TEST(ChatSession, ToolsExtraVariablesAndFixedTime) {
  const std::string dir = model_copy("vars");
  write(dir + "/chat_template.jinja",
        "{{ tools | length if tools else 'none' }}|{{ enable_thinking }}|"
        "{{ strftime_now('%Y-%m-%d') }}|{{ add_generation_prompt }}");
  auto s = DeterministicSession::open(dir, tiny_options());
  ChatTemplateOptions o;
  o.now_unix_seconds = 86400 * 365;
  o.extra_variables_json = R"({"enable_thinking": false})";
  EXPECT_EQ(s.apply_chat_template(conversation(), o), "none|False|1971-01-01|True");
  o.tools_json = R"([{"type": "function", "function": {"name": "f"}}, {"type": "function"}])";
  EXPECT_EQ(s.apply_chat_template(conversation(), o), "2|False|1971-01-01|True");

  std::string field;
  o.tools_json = R"({"not": "a list"})";
  EXPECT_EQ(code_of([&] { s.apply_chat_template(conversation(), o); }, &field),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(field, "tools");
  o.tools_json.clear();
  o.extra_variables_json = "[1]";
  EXPECT_EQ(code_of([&] { s.apply_chat_template(conversation(), o); }, &field),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(field, "extra_variables_json");
}

TEST(ChatSession, NamedTemplatesAndRaiseException) {
  const std::string dir = model_copy("named");
  write(dir + "/chat_template.json", R"({"chat_template": [
      {"name": "default", "template": "{% if messages[0].role != 'user' %}{{ raise_exception('Conversations must start with the user') }}{% endif %}plain"},
      {"name": "tool_use", "template": "tools"}]})");
  auto s = DeterministicSession::open(dir, tiny_options());
  std::string message;
  EXPECT_EQ(code_of([&] { s.apply_chat_template(conversation()); }, nullptr, &message),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(message, "Conversations must start with the user");
  const std::vector<ChatMessage> user_first = {{"user", "hi"}};
  EXPECT_EQ(s.apply_chat_template(user_first), "plain");
  ChatTemplateOptions o;
  o.tools_json = "[]";
  EXPECT_EQ(s.apply_chat_template(user_first, o), "tools");
  o.tools_json.clear();
  o.template_name = "tool_use";
  EXPECT_EQ(s.apply_chat_template(user_first, o), "tools");
  o.template_name = "nope";
  std::string field;
  EXPECT_EQ(code_of([&] { s.apply_chat_template(user_first, o); }, &field),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(field, "template_name");
}

TEST(ChatSession, NoTemplateAndBrokenTemplate) {
  const std::string dir = model_copy("none");
  write(dir + "/tokenizer_config.json", R"({"eos_token": "<|endoftext|>"})");
  auto none = DeterministicSession::open(dir, tiny_options());
  EXPECT_FALSE(none.has_chat_template());
  EXPECT_EQ(code_of([&] { none.apply_chat_template(conversation()); }), ErrorCode::kUnsupported);
  write(dir + "/chat_template.jinja", "{% for %}");
  auto broken = DeterministicSession::open(dir, tiny_options());  // opens; chat fails
  std::string field, message;
  EXPECT_EQ(code_of([&] { broken.apply_chat_template(conversation()); }, &field, &message),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(field, "chat_template");
  EXPECT_NE(message.find("line 1, column"), std::string::npos) << message;
}

TEST(ChatSession, GenerationConfigJsonGivesTheDefaults) {
  const std::string dir = model_copy("defaults");
  {
    auto s = DeterministicSession::open(dir, tiny_options());
    EXPECT_EQ(s.default_generation_config().temperature, 0.0f);  // do_sample false
  }
  write(dir + "/generation_config.json",
        R"({"do_sample": true, "temperature": 0.7, "top_k": 20, "top_p": 0.8,
            "repetition_penalty": 1.05, "max_new_tokens": 33, "eos_token_id": [511]})");
  auto s = DeterministicSession::open(dir, tiny_options());
  const GenerationConfig d = s.default_generation_config();
  EXPECT_FLOAT_EQ(d.temperature, 0.7f);
  EXPECT_EQ(d.top_k, 20);
  EXPECT_FLOAT_EQ(d.top_p, 0.8f);
  EXPECT_FLOAT_EQ(d.repetition_penalty, 1.05f);
  EXPECT_EQ(d.max_new_tokens, 33);
  EXPECT_FALSE(d.stop_token_ids.has_value());
  EXPECT_EQ(s.eos_token_ids(), std::vector<std::int32_t>{511});
  // The fingerprint records the effective config.
  GenerationConfig c = d;
  c.seed = 1;
  c.max_new_tokens = 3;
  const GenerationResult r = s.chat(conversation(), c);
  EXPECT_NE(r.fingerprint_json.find("\"top_k\":20"), std::string::npos) << r.fingerprint_json;

  write(dir + "/generation_config.json", R"({"top_p": 2.0})");
  std::string message;
  EXPECT_EQ(code_of([&] { DeterministicSession::open(dir, tiny_options()); }, nullptr, &message),
            ErrorCode::kCorrupt);
  EXPECT_NE(message.find("generation_config.json"), std::string::npos) << message;
}

// Three turns of text chat: each turn's messages are the previous ones + the reply + a
// new user message. Bitwise equal with the prefix cache off, cold and warm.
std::vector<GenerationResult> three_turns(DeterministicSession& s) {
  std::vector<ChatMessage> messages = {{"system", "You are terse."}};
  const char* users[] = {"Tell me about the quick brown fox.", "And the lazy dog?", "Thanks!"};
  std::vector<GenerationResult> out;
  for (int t = 0; t < 3; ++t) {
    messages.push_back({"user", users[t]});
    GenerationConfig c;
    c.max_new_tokens = 20;
    c.temperature = t == 1 ? 0.7f : 0.0f;
    c.seed = 11;
    out.push_back(s.chat(messages, c));
    messages.push_back({"assistant", out.back().sequences[0].text});
  }
  return out;
}

TEST(ChatSession, ThreeTurnTextChatIsBitwiseTheSameCacheOffColdWarm) {
  SessionOptions off = tiny_options();
  off.cache.prefix.enabled = false;
  auto a = DeterministicSession::open(tiny_model_dir(), off);
  const auto want = three_turns(a);
  auto b = DeterministicSession::open(tiny_model_dir(), tiny_options());
  const auto cold = three_turns(b);
  const auto warm = three_turns(b);
  for (int t = 0; t < 3; ++t) {
    for (const auto* got : {&cold, &warm}) {
      EXPECT_EQ((*got)[t].prompt_tokens, want[t].prompt_tokens) << t;
      EXPECT_EQ((*got)[t].sequences[0].tokens, want[t].sequences[0].tokens) << t;
      EXPECT_EQ((*got)[t].sequences[0].step_digests, want[t].sequences[0].step_digests) << t;
    }
  }
  EXPECT_GT(cold[2].cache.prefix_cached_tokens, 0);
  EXPECT_GT(warm[2].cache.prefix_cached_tokens, cold[2].cache.prefix_cached_tokens - 1);
}

}  // namespace
}  // namespace detinfer
