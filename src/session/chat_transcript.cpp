#include "session/chat_transcript.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace detinfer {

TranscriptChat transcript_chat(const std::vector<ChatMessage>& messages,
                               const ChatTemplateOptions& options, std::string prompt_suffix) {
  if (!options.now_unix_seconds) {
    fail(ErrorCode::kInvalidArgument,
         "transcript_chat: ChatTemplateOptions::now_unix_seconds must be set (the time the "
         "prompt was rendered with), or the conversation cannot be rendered again");
  }
  TranscriptChat c;
  c.messages_json = chat_messages_to_json(messages);
  c.add_generation_prompt = options.add_generation_prompt;
  c.tools_json = options.tools_json;
  c.extra_variables_json = options.extra_variables_json;
  c.template_name = options.template_name;
  c.now_unix_seconds = *options.now_unix_seconds;
  c.prompt_suffix = std::move(prompt_suffix);
  return c;
}

namespace session {

namespace {

ChatTemplateOptions template_options(const TranscriptChat& c) {
  ChatTemplateOptions o;
  o.add_generation_prompt = c.add_generation_prompt;
  o.tools_json = c.tools_json;
  o.extra_variables_json = c.extra_variables_json;
  o.template_name = c.template_name;
  o.now_unix_seconds = c.now_unix_seconds;
  return o;
}

}  // namespace

std::vector<std::int32_t> chat_prompt_ids(const DeterministicSession& session,
                                          const TranscriptChat& chat) {
  std::vector<std::int32_t> ids;
  try {
    ids = session.encode_chat(chat_messages_from_json(chat.messages_json), template_options(chat));
  } catch (const Error& e) {
    // messages[2].content -> chat.messages[2].content; an option -> its transcript field
    const std::string& f = e.field();
    const std::string field = f == "extra_variables_json" ? "chat.extra_variables"
                              : f.empty()                 ? "chat.messages"
                                                          : "chat." + f;
    throw Error(e.code(), "transcript chat: " + e.message(), field);
  }
  if (!chat.prompt_suffix.empty()) {
    const Tokenizer* tok = session.tokenizer();
    DETINFER_INTERNAL_CHECK(tok != nullptr);  // encode_chat needed it
    const std::vector<std::int32_t> suffix = tok->encode(chat.prompt_suffix, false);
    ids.insert(ids.end(), suffix.begin(), suffix.end());
  }
  return ids;
}

namespace {

VerifyDivergence prompt_divergence(const std::vector<std::int32_t>& rendered,
                                   const std::vector<std::int32_t>& recorded) {
  const auto n = std::min(rendered.size(), recorded.size());
  std::size_t i = 0;
  while (i < n && rendered[i] == recorded[i]) ++i;
  VerifyDivergence d;
  d.step = static_cast<std::int32_t>(i);
  d.expected_token = i < rendered.size() ? rendered[i] : -1;
  d.recorded_token = i < recorded.size() ? recorded[i] : -1;
  d.reason = "prompt";
  return d;
}

}  // namespace

std::vector<std::optional<VerifyDivergence>> resolve_chat_prompts(
    const DeterministicSession& session, std::vector<Transcript>& transcripts) {
  std::vector<std::optional<VerifyDivergence>> out(transcripts.size());
  for (std::size_t i = 0; i < transcripts.size(); ++i) {
    Transcript& t = transcripts[i];
    if (!t.chat) continue;
    std::vector<std::int32_t> ids;
    try {
      ids = chat_prompt_ids(session, *t.chat);
    } catch (const Error& e) {
      throw Error(e.code(), "transcript " + std::to_string(i) + ": " + e.message(), e.field());
    }
    if (t.prompt_tokens.empty()) {
      t.prompt_tokens = std::move(ids);
    } else if (ids != t.prompt_tokens) {
      out[i] = prompt_divergence(ids, t.prompt_tokens);
    }
  }
  return out;
}

}  // namespace session
}  // namespace detinfer
