// Transcript JSON (detinfer.transcript/1, and /2 with a chat's conversation): round trip,
// the transcript of a fingerprint,
// and hostile documents (invalid UTF-8, deep nesting, huge lists, mismatched lengths,
// wrong types, unknown fields, other formats): each a clear Error naming what is wrong.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "detinfer/error.h"
#include "detinfer/fingerprint.h"
#include "detinfer/transcript.h"

namespace detinfer {
namespace {

Transcript sample_transcript() {
  Transcript t;
  t.model_fingerprint = Hash128::from_hex("0123456789abcdef0123456789abcdef");
  t.weight_dtype = "f32";
  t.numerics_mode = "canonical";
  t.numerics_spec = 1;
  t.prompt_tokens = {1, 2, 3};
  t.config.temperature = 0.7f;
  t.config.top_k = 5;
  t.config.stop_token_ids = std::vector<std::int32_t>{2};
  t.seed = 18446744073709551615ull;  // above 2^53: written as a decimal string
  TranscriptSample s;
  s.tokens = {7, 8};
  s.step_digests = {0x1234, 0xffffffffffffffffull};
  s.chain_digest = chain_digest(s.step_digests);
  t.samples.push_back(s);
  return t;
}

void expect_error(const std::string& text, ErrorCode code, const std::string& mentions) {
  try {
    Transcript::from_json(text);
    ADD_FAILURE() << "accepted: " << text.substr(0, 200);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
  }
}

TEST(TranscriptJson, RoundTripsExactly) {
  const Transcript t = sample_transcript();
  const std::string one = t.to_json();
  const Transcript back = Transcript::from_json(one);
  EXPECT_EQ(back.to_json(), one);
  EXPECT_EQ(back.seed, t.seed);
  EXPECT_EQ(back.samples[0].step_digests, t.samples[0].step_digests);
  EXPECT_EQ(back.config.top_k, 5);
  EXPECT_EQ(Transcript::from_json(t.to_json(2)).to_json(), one);
  EXPECT_NE(one.find("\"format\":\"detinfer.transcript/1\""), std::string::npos);
}

TEST(TranscriptJson, OfAFingerprintCarriesItsRequestAndOutput) {
  RunFingerprint fp;
  fp.model.fingerprint = Hash128::from_hex("00000000000000000000000000000001");
  fp.model.weight_dtype = "bf16";
  fp.numerics.spec_version = 1;
  fp.set_prompt({4, 5});
  fp.request.config.max_new_tokens = 2;
  fp.request.seed = 9;
  FingerprintSequence s;
  s.tokens = {1, 2};
  s.step_digests = {3, 4};
  s.chain_digest = chain_digest(s.step_digests);
  fp.sequences.push_back(s);
  const Transcript t = transcript_of(fp);
  EXPECT_EQ(t.prompt_tokens, (std::vector<std::int32_t>{4, 5}));
  EXPECT_EQ(t.weight_dtype, "bf16");
  EXPECT_EQ(t.seed, 9u);
  EXPECT_EQ(t.samples[0].step_digests, s.step_digests);
  fp.set_prompt({4, 5}, false);
  EXPECT_THROW(transcript_of(fp), Error);
}

TEST(TranscriptJson, HostileDocumentsAreInvalidArgument) {
  const std::string good = sample_transcript().to_json();
  const auto bad = ErrorCode::kInvalidArgument;
  expect_error("", bad, "transcript");
  expect_error("[1,2]", bad, "object");
  expect_error(std::string(100000, '[') + std::string(100000, ']'), bad, "deep");
  std::string utf8 = good;
  utf8.replace(utf8.find("canonical"), 9,
               "canon\xff\xfe"
               "al");
  expect_error(utf8, bad, "not valid JSON");
  // Over the size limit.
  expect_error(std::string(17 << 20, ' ') + good, bad, "transcript");
  nlohmann::json j = nlohmann::json::parse(good);
  auto with = [&](const std::function<void(nlohmann::json&)>& f) {
    nlohmann::json x = j;
    f(x);
    return x.dump();
  };
  expect_error(with([](auto& x) { x["samples"][0]["step_digests"].erase(0); }), bad,
               "one per token");
  expect_error(with([](auto& x) { x["samples"] = nlohmann::json::array(); }), bad, "samples");
  expect_error(with([](auto& x) { x["samples"][0]["tokens"][0] = -1; }), bad, "tokens[0]");
  expect_error(with([](auto& x) { x["samples"][0]["tokens"][0] = "7"; }), bad, "integer");
  expect_error(with([](auto& x) { x["prompt_tokens"] = std::vector<int>(1100000, 1); }), bad,
               "at most");
  expect_error(with([](auto& x) { x["seed"] = 9; }), bad, "seed");
  expect_error(with([](auto& x) { x["seed"] = "99999999999999999999"; }), bad, "seed");
  expect_error(with([](auto& x) { x["extra"] = 1; }), bad, "extra");
  expect_error(with([](auto& x) { x.erase("config"); }), bad, "config");
  expect_error(with([](auto& x) { x["config"]["temperature"] = "hot"; }), bad, "temperature");
  expect_error(with([](auto& x) { x["model"]["fingerprint"] = "xyz"; }), bad, "fingerprint");
  expect_error(with([](auto& x) { x["samples"][0]["finish_reason"] = "bored"; }), bad,
               "finish_reason");
  expect_error(with([](auto& x) { x["format"] = "something/1"; }), bad, "format");
  expect_error(with([](auto& x) { x["format"] = "detinfer.transcript/3"; }),
               ErrorCode::kUnsupported, "transcript/3");
  // /2 needs the conversation; /1 has none.
  expect_error(with([](auto& x) { x["format"] = "detinfer.transcript/2"; }), bad, "chat");
  expect_error(with([](auto& x) { x["chat"] = {{"messages", "[]"}}; }), bad, "chat");
}

Transcript chat_sample() {
  Transcript t = sample_transcript();
  TranscriptChat c;
  c.messages_json = R"([{"role":"user","content":"hi"}])";
  c.add_generation_prompt = false;
  c.tools_json = R"([{"type":"function","function":{"name":"f"}}])";
  c.template_name = "tool_use";
  c.now_unix_seconds = -5;
  c.prompt_suffix = "<tool_call>\n";
  t.chat = c;
  return t;
}

TEST(TranscriptJson, ChatTranscriptsAreFormat2AndRoundTrip) {
  const Transcript t = chat_sample();
  const std::string one = t.to_json();
  EXPECT_NE(one.find("\"format\":\"detinfer.transcript/2\""), std::string::npos);
  const Transcript back = Transcript::from_json(one);
  ASSERT_TRUE(back.chat.has_value());
  EXPECT_EQ(back.chat->messages_json, t.chat->messages_json);
  EXPECT_EQ(back.chat->tools_json, t.chat->tools_json);
  EXPECT_FALSE(back.chat->add_generation_prompt);
  EXPECT_EQ(back.chat->now_unix_seconds, -5);
  EXPECT_EQ(back.chat->prompt_suffix, t.chat->prompt_suffix);
  EXPECT_EQ(back.to_json(), one);
  // Left-out prompt ids and optional chat fields.
  Transcript bare = t;
  bare.prompt_tokens.clear();
  bare.chat->tools_json.clear();
  bare.chat->template_name.clear();
  bare.chat->prompt_suffix.clear();
  const std::string b = bare.to_json();
  for (const char* absent : {"prompt_tokens", "tools", "template_name", "prompt_suffix"}) {
    EXPECT_EQ(b.find(absent), std::string::npos) << absent;
  }
  EXPECT_TRUE(Transcript::from_json(b).prompt_tokens.empty());
  const nlohmann::json j = nlohmann::json::parse(one);
  auto with = [&](const std::function<void(nlohmann::json&)>& f) {
    nlohmann::json x = j;
    f(x);
    return x.dump();
  };
  const auto bad = ErrorCode::kInvalidArgument;
  expect_error(with([](auto& x) { x["chat"].erase("messages"); }), bad, "chat.messages");
  expect_error(with([](auto& x) { x["chat"]["messages"] = nlohmann::json::array(); }), bad,
               "chat.messages");
  expect_error(with([](auto& x) { x["chat"].erase("now"); }), bad, "chat.now");
  expect_error(with([](auto& x) { x["chat"]["now"] = 1.5; }), bad, "chat.now");
  expect_error(with([](auto& x) { x["chat"]["add_generation_prompt"] = 1; }), bad,
               "add_generation_prompt");
  expect_error(with([](auto& x) { x["chat"]["role"] = "user"; }), bad, "role");
  expect_error(with([](auto& x) { x["format"] = "detinfer.transcript/1"; }), bad, "chat");
}

}  // namespace
}  // namespace detinfer
