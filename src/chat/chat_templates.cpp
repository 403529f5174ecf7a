#include "chat/chat_templates.h"

#include <chrono>
#include <optional>

#include "chat/chat_messages.h"
#include "core/check.h"
#include "jinja/template.h"

namespace detinfer::chat {

namespace {

using Json = nlohmann::ordered_json;

Json parse_option(const std::string& text, const char* field, bool want_object) {
  // Hardened and ordered: tools print in the order given, as in Python.
  Json j = core::parse_json_ordered(text, kMessageLimits, ErrorCode::kInvalidArgument, field);
  if (want_object ? !j.is_object() : !j.is_array()) {
    throw Error(ErrorCode::kInvalidArgument,
                str_cat(field, want_object ? ": expected a JSON object" : ": expected a JSON list"),
                field);
  }
  return j;
}

}  // namespace

struct ChatTemplates::Parsed {
  std::optional<jinja::Template> tmpl;
  std::string error;  // when it did not parse
};

ChatTemplates::ChatTemplates(TemplateSource source) : source_(std::move(source)) {
  for (const auto& [name, text] : source_.templates) {
    auto p = std::make_shared<Parsed>();
    try {
      p->tmpl.emplace(jinja::Template::parse(text));
    } catch (const Error& e) {
      p->error = e.message();
    }
    parsed_.emplace(name, std::move(p));
  }
}

ChatTemplates::~ChatTemplates() = default;
ChatTemplates::ChatTemplates(ChatTemplates&&) noexcept = default;
ChatTemplates& ChatTemplates::operator=(ChatTemplates&&) noexcept = default;

const std::string& ChatTemplates::select(const ChatTemplateOptions& options) const {
  if (empty()) {
    fail(ErrorCode::kUnsupported,
         "the model has no chat template (tokenizer_config.json chat_template, "
         "chat_template.jinja or chat_template.json); set SessionOptions.chat_template_path");
  }
  const auto& t = source_.templates;
  std::string name = options.template_name;
  if (name.empty()) {
    if (!options.tools_json.empty() && t.count("tool_use") != 0) {
      name = "tool_use";
    } else if (t.count("default") != 0) {
      name = "default";
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  "the model has several chat templates and none named \"default\"; set "
                  "ChatTemplateOptions.template_name",
                  "template_name");
    }
  }
  const auto it = t.find(name);
  if (it == t.end()) {
    std::string names;
    for (const auto& [n, unused] : t) names += (names.empty() ? "" : ", ") + n;
    throw Error(ErrorCode::kInvalidArgument,
                str_cat("template_name: the model has no chat template named \"", name,
                        "\" (it has: ", names, ")"),
                "template_name");
  }
  return it->first;
}

std::string ChatTemplates::render(const std::vector<ChatMessage>& messages,
                                  const ChatTemplateOptions& options) const {
  const std::string& name = select(options);
  const Parsed& p = *parsed_.at(name);
  if (!p.tmpl) {
    throw Error(
        ErrorCode::kInvalidArgument,
        str_cat("the model's chat template (", source_.origin, ") does not parse: ", p.error),
        "chat_template");
  }
  Json ctx = Json::object();
  for (const auto& [key, value] : source_.special_tokens.items()) ctx[key] = value;
  if (!options.extra_variables_json.empty()) {
    const Json extra = parse_option(options.extra_variables_json, "extra_variables_json", true);
    for (const auto& [key, value] : extra.items()) ctx[key] = value;
  }
  ctx["messages"] = messages_to_template_json(messages);
  ctx["tools"] =
      options.tools_json.empty() ? Json(nullptr) : parse_option(options.tools_json, "tools", false);
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = options.add_generation_prompt;
  const std::int64_t now = options.now_unix_seconds
                               ? *options.now_unix_seconds
                               : std::chrono::duration_cast<std::chrono::seconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count();
  return p.tmpl->render(ctx, now);
}

}  // namespace detinfer::chat
