// Shared by `detinfer chat` and `detinfer render-template`: reading conversation files
// and the chat-template options both commands take.
#pragma once

#include <CLI/CLI.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "detinfer/chat.h"
#include "detinfer/error.h"

namespace detinfer_cli {

inline std::string read_text_file(const std::string& path, const char* option) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw detinfer::Error(detinfer::ErrorCode::kNotFound,
                          std::string(option) + ": cannot read " + path);
  }
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// A messages file: a JSON list of messages, or an object with "messages" (and optionally
// "tools", as in an OpenAI request body). Tools found there go to *tools_json when it is
// still empty.
inline std::vector<detinfer::ChatMessage> read_messages_file(const std::string& path,
                                                             std::string* tools_json) {
  const std::string text = read_text_file(path, "--messages");
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_object()) {
    if (!j.contains("messages")) {
      throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                            path + ": expected a list of messages or {\"messages\": [...]}");
    }
    if (tools_json != nullptr && tools_json->empty() && j.contains("tools") &&
        !j["tools"].is_null()) {
      *tools_json = j["tools"].dump();
    }
    return detinfer::chat_messages_from_json(j["messages"].dump());
  }
  return detinfer::chat_messages_from_json(text);
}

struct TemplateFlags {
  std::string chat_template;  // override file
  std::string template_name;
  std::string tools_file;
  std::string extra_vars;  // JSON object text
  std::optional<std::int64_t> now;
  bool no_generation_prompt = false;

  void add(CLI::App& sub) {
    sub.add_option("--chat-template", chat_template,
                   "Chat template file instead of the model's (.jinja, or .json with "
                   "\"chat_template\")");
    sub.add_option("--template-name", template_name, "Named template (e.g. tool_use)");
    sub.add_option("--tools", tools_file, "JSON file with a list of tool definitions");
    sub.add_option("--extra-vars", extra_vars,
                   "Extra template variables as a JSON object, e.g. '{\"enable_thinking\":false}'");
    sub.add_option("--now", now, "Unix time strftime_now() formats (default: the clock)");
    sub.add_flag("--no-generation-prompt", no_generation_prompt,
                 "Do not end with the assistant turn's opening");
  }

  detinfer::ChatTemplateOptions options() const {
    detinfer::ChatTemplateOptions o;
    o.add_generation_prompt = !no_generation_prompt;
    o.template_name = template_name;
    if (!tools_file.empty()) o.tools_json = read_text_file(tools_file, "--tools");
    o.extra_variables_json = extra_vars;
    o.now_unix_seconds = now;
    return o;
  }
};

}  // namespace detinfer_cli
