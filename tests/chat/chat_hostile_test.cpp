// Hostile chat input (issue 33): JSON nested 10^3 ... 10^6 deep in every place a client's
// JSON reaches the template (messages, tool-call arguments as a string or built through the
// API, tools, extra variables) is a clean Error naming the field, found before any
// recursive work; and the client's object key order reaches the template unchanged.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/chat_templates.h"
#include "detinfer/chat.h"
#include "detinfer/error.h"

namespace detinfer::chat {
namespace {

const std::int64_t kDepths[] = {1000, 10000, 100000, 1000000};

std::string nested(std::int64_t depth) {
  return std::string(static_cast<std::size_t>(depth), '[') +
         std::string(static_cast<std::size_t>(depth), ']');
}

ChatTemplates templates(const std::string& source) {
  TemplateSource src;
  src.templates["default"] = source;
  src.origin = "test";
  return ChatTemplates(std::move(src));
}

// The Error that rendering throws (kInternal and a test failure when none).
Error render_error(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& o) {
  try {
    templates("{{ messages | tojson }}{{ tools | tojson }}").render(messages, o);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error(ErrorCode::kInternal, "none");
}

std::vector<ChatMessage> call_with_arguments(const std::string& arguments) {
  ChatMessage user{"user", std::string("hi")};
  ChatMessage assistant;
  assistant.role = "assistant";
  ChatToolCall call;
  call.name = "f";
  call.arguments = arguments;
  assistant.tool_calls.push_back(call);
  return {user, assistant};
}

TEST(ChatHostile, DeepToolCallArgumentsStringIsRejectedNamingTheField) {
  for (const std::int64_t depth : kDepths) {
    // Over JSON: the arguments are a string, so the messages themselves are shallow.
    const std::string body = R"([{"role":"user","content":"hi"},{"role":"assistant",)"
                             R"("tool_calls":[{"function":{"name":"f","arguments":")" +
                             nested(depth) + R"("}}]}])";
    const std::vector<ChatMessage> parsed = chat_messages_from_json(body);
    ASSERT_EQ(parsed.at(1).tool_calls.at(0).arguments.size(), static_cast<std::size_t>(2 * depth));
    const Error e = render_error(parsed, {});
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << depth;
    EXPECT_EQ(e.field(), "messages[1].tool_calls[0].function.arguments") << e.what();
    EXPECT_NE(std::string(e.what()).find("nested deeper than 64"), std::string::npos) << e.what();
  }
}

TEST(ChatHostile, DeepToolCallArgumentsThroughTheApiAreRejected) {
  for (const std::int64_t depth : kDepths) {
    // Not valid JSON either (unclosed): still refused by the depth scan, never parsed.
    for (const std::string& args :
         {nested(depth), std::string(static_cast<std::size_t>(depth), '{')}) {
      const Error e = render_error(call_with_arguments(args), {});
      EXPECT_EQ(e.field(), "messages[1].tool_calls[0].function.arguments") << depth;
    }
  }
}

TEST(ChatHostile, DeepMessagesToolsAndExtraVariablesAreRejected) {
  for (const std::int64_t depth : kDepths) {
    try {
      chat_messages_from_json(nested(depth));
      ADD_FAILURE() << "messages accepted at depth " << depth;
    } catch (const Error& e) {
      EXPECT_EQ(e.field(), "messages");
    }
    ChatTemplateOptions tools;
    tools.tools_json = nested(depth);
    EXPECT_EQ(render_error(call_with_arguments("{}"), tools).field(), "tools");
    ChatTemplateOptions extra;
    extra.extra_variables_json = "{\"x\":" + nested(depth) + "}";
    EXPECT_EQ(render_error(call_with_arguments("{}"), extra).field(), "extra_variables_json");
  }
}

TEST(ChatHostile, ShallowArgumentsStillRenderAsJsonOrText) {
  const ChatTemplates t = templates(
      "{% for m in messages %}{% for c in m.tool_calls %}{{ c.function.arguments | "
      "tojson }};{% endfor %}{% endfor %}");
  const std::string depth64 = nested(64 - 1);  // inside the limit, with the root level
  std::vector<ChatMessage> m = call_with_arguments(depth64);
  m.push_back(call_with_arguments("not json [").at(1));
  EXPECT_EQ(t.render(m, {}), depth64 + ";\"not json [\";");
}

TEST(ChatHostile, ClientKeyOrderReachesTheTemplate) {
  // Non-alphabetical keys in the tools, in object arguments and in string arguments.
  const std::string messages =
      R"([{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[)"
      R"({"function":{"name":"f","arguments":{"zeta":1,"alpha":{"y":2,"b":3}}}},)"
      R"({"function":{"name":"g","arguments":"{\"zz\": true, \"aa\": null}"}}]}])";
  ChatTemplateOptions o;
  o.tools_json = R"([{"type":"function","function":{"name":"f","parameters":)"
                 R"({"type":"object","properties":{"zeta":{},"alpha":{}}}}}])";
  o.extra_variables_json = R"({"zvar":1,"avar":2})";
  const ChatTemplates t = templates(
      "{{ tools | tojson }}|{% for c in messages[1].tool_calls %}{{ c.function.arguments | "
      "tojson }}|{% endfor %}{{ zvar }}{{ avar }}");
  EXPECT_EQ(t.render(chat_messages_from_json(messages), o),
            R"([{"type": "function", "function": {"name": "f", "parameters": )"
            R"({"type": "object", "properties": {"zeta": {}, "alpha": {}}}}}])"
            R"(|{"zeta": 1, "alpha": {"y": 2, "b": 3}}|{"zz": true, "aa": null}|12)");
  // The messages echoed back as JSON (arguments as a JSON string) keep the order too.
  EXPECT_NE(chat_messages_to_json(chat_messages_from_json(messages)).find(R"({\"zeta\":1,\"alpha)"),
            std::string::npos);
}

}  // namespace
}  // namespace detinfer::chat
