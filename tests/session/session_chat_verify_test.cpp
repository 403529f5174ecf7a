// The messages form of a transcript (format /2, docs/fingerprint.md "Chat transcripts"):
// chat() results carry their conversation; verify renders it and checks it gives the
// recorded prompt ids (or uses them when left out); a changed message, option or render
// time is a "prompt" divergence at the first differing id; broken conversations are
// errors naming the transcript field.
#include <gtest/gtest.h>

#include <fstream>

#include "detinfer/error.h"
#include "session/tiny_session.h"

namespace detinfer {
namespace {

using testing::tiny_model_dir;
using testing::tiny_options;

std::vector<ChatMessage> conversation() {
  return {{"system", "You are terse."},
          {"user", "Name a colour."},
          {"assistant", "Blue."},
          {"user", "Another one, please."}};
}

GenerationConfig sampled() {
  GenerationConfig c;
  c.max_new_tokens = 12;
  c.temperature = 0.9f;
  c.seed = 77;
  c.num_return_sequences = 2;
  return c;
}

struct ChatVerifyTest : ::testing::Test {
  static DeterministicSession& session() {
    static DeterministicSession s = DeterministicSession::open(tiny_model_dir(), tiny_options());
    return s;
  }
  static Transcript chat_transcript(const ChatTemplateOptions& o = {}) {
    const GenerationResult r = session().chat(conversation(), sampled(), o);
    return Transcript::from_json(r.transcript_json);
  }
};

TEST_F(ChatVerifyTest, ChatTranscriptsCarryTheConversationAndVerify) {
  ChatTemplateOptions o;
  o.extra_variables_json = R"({"note": "x"})";
  const GenerationResult r = session().chat(conversation(), sampled(), o);
  EXPECT_NE(r.transcript_json.find("\"detinfer.transcript/2\""), std::string::npos);
  const Transcript t = Transcript::from_json(r.transcript_json);
  ASSERT_TRUE(t.chat.has_value());
  EXPECT_EQ(chat_messages_from_json(t.chat->messages_json).size(), 4u);
  EXPECT_EQ(t.chat->extra_variables_json, o.extra_variables_json);
  EXPECT_GT(t.chat->now_unix_seconds, 0);  // the clock, read once
  EXPECT_EQ(t.prompt_tokens, r.prompt_tokens);
  EXPECT_EQ(Transcript::from_json(t.to_json()).to_json(), t.to_json());  // round trip
  const VerifyResult v = session().verify(t);
  EXPECT_TRUE(v.verified) << v.message;
  EXPECT_EQ(v.steps_checked, 24);
  // The messages form alone: the prompt ids left out are what the conversation renders to.
  Transcript bare = t;
  bare.prompt_tokens.clear();
  EXPECT_EQ(bare.to_json().find("prompt_tokens"), std::string::npos);
  const VerifyResult vb = session().verify(Transcript::from_json(bare.to_json()));
  EXPECT_TRUE(vb.verified) << vb.message;
  EXPECT_EQ(vb.steps_checked, 24);
}

TEST_F(ChatVerifyTest, AChangedConversationIsAPromptDivergence) {
  const Transcript t = chat_transcript();
  auto changed = [&](auto edit) {
    Transcript x = t;
    edit(*x.chat);
    return session().verify(x);
  };
  std::vector<ChatMessage> other = conversation();
  other[3].content = "Another one, please!";
  const VerifyResult m =
      changed([&](TranscriptChat& c) { c.messages_json = chat_messages_to_json(other); });
  ASSERT_FALSE(m.verified);
  ASSERT_TRUE(m.divergence.has_value());
  EXPECT_EQ(m.divergence->reason, "prompt");
  const std::vector<std::int32_t> rendered = session().encode_chat(other);
  std::int32_t first = 0;
  while (rendered[first] == t.prompt_tokens[first]) ++first;
  EXPECT_EQ(m.divergence->step, first);
  EXPECT_EQ(m.divergence->expected_token, rendered[first]);
  EXPECT_EQ(m.divergence->recorded_token, t.prompt_tokens[first]);
  const VerifyResult g = changed([](TranscriptChat& c) { c.add_generation_prompt = false; });
  ASSERT_FALSE(g.verified);
  EXPECT_EQ(g.divergence->reason, "prompt");
  EXPECT_EQ(g.divergence->expected_token, -1);  // the rendering ends first
  const VerifyResult s = changed([](TranscriptChat& c) { c.prompt_suffix = "{\"name\": "; });
  ASSERT_FALSE(s.verified);
  EXPECT_EQ(s.divergence->reason, "prompt");
  EXPECT_EQ(s.divergence->step, static_cast<std::int32_t>(t.prompt_tokens.size()));
  // Verified transcripts beside it in one call stay verified.
  Transcript bad = t;
  bad.chat->messages_json = chat_messages_to_json(other);
  const std::vector<VerifyResult> both = session().verify(std::vector<Transcript>{bad, t});
  EXPECT_FALSE(both[0].verified);
  EXPECT_TRUE(both[1].verified) << both[1].message;
}

TEST_F(ChatVerifyTest, TheRenderTimeIsPartOfTheRecord) {
  // A template that prints the date (like Llama 3.1's): the transcript's `now` renders it.
  const std::string path = testing::test_tmp_path("chat-verify-", "date.jinja");
  std::ofstream(path) << "{{ strftime_now('%d %b %Y') }}{% for m in messages %}"
                         "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                         "<|im_start|>assistant\n";
  SessionOptions so = tiny_options();
  so.chat_template_path = path;
  DeterministicSession s = DeterministicSession::open(tiny_model_dir(), so);
  ChatTemplateOptions o;
  o.now_unix_seconds = 1764806400;  // 2025-12-04
  const Transcript t = Transcript::from_json(s.chat(conversation(), sampled(), o).transcript_json);
  EXPECT_EQ(t.chat->now_unix_seconds, 1764806400);
  EXPECT_TRUE(s.verify(t).verified);
  Transcript later = t;
  later.chat->now_unix_seconds += 86400;
  const VerifyResult v = s.verify(later);
  ASSERT_FALSE(v.verified);
  EXPECT_EQ(v.divergence->reason, "prompt");
  o.now_unix_seconds = later.chat->now_unix_seconds;
  const std::vector<std::int32_t> rendered = s.encode_chat(conversation(), o);
  std::int32_t first = 0;
  while (rendered[first] == t.prompt_tokens[first]) ++first;
  EXPECT_EQ(v.divergence->step, first);
  EXPECT_LT(first, 4);  // in the date that opens the prompt
}

TEST_F(ChatVerifyTest, BrokenConversationsAreErrorsNamingTheField) {
  const Transcript t = chat_transcript();
  auto field_of = [&](auto edit) {
    Transcript x = t;
    edit(*x.chat);
    try {
      session().verify(x);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      return e.field();
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(field_of([](TranscriptChat& c) { c.messages_json = "[{\"role\": 5}]"; }),
            "chat.messages[0].role");
  EXPECT_EQ(field_of([](TranscriptChat& c) { c.messages_json = "not json"; }), "chat.messages");
  EXPECT_EQ(field_of([](TranscriptChat& c) { c.tools_json = "{\"not\": \"an array\"}"; }),
            "chat.tools");
  EXPECT_EQ(field_of([](TranscriptChat& c) { c.extra_variables_json = "[1]"; }),
            "chat.extra_variables");
  EXPECT_EQ(field_of([](TranscriptChat& c) { c.template_name = "nope"; }), "chat.template_name");
  // transcript_chat needs the render time.
  EXPECT_THROW(transcript_chat(conversation(), ChatTemplateOptions{}), Error);
}

}  // namespace
}  // namespace detinfer
