#include "tool_params.h"

#include <algorithm>
#include <set>

#include "detinfer/hash.h"
#include "detinfer/tokenizer.h"
#include "openai_protocol.h"
#include "serve_request.h"

namespace detinfer_cli {

using nlohmann::json;
namespace chat = detinfer::chat;

namespace {

bool has(const json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

// Arguments of a function without parameters: the empty object.
constexpr const char* kNoParameters = R"({"type":"object","additionalProperties":false})";

// One element of `tools`: {"type": "function", "function": {"name", "description",
// "parameters", "strict"}}; returns (name, parameters schema text).
std::pair<std::string, std::string> read_tool(const json& t, const nlohmann::ordered_json& ot,
                                              std::size_t i) {
  const std::string at = "tools[" + std::to_string(i) + "]";
  if (!t.is_object()) reject("tools", "'" + at + "' must be an object");
  if (!has(t, "type") || t["type"] != "function") {
    reject("tools", "'" + at + ".type' must be \"function\"");
  }
  if (!has(t, "function") || !t["function"].is_object()) {
    reject("tools", "'" + at + ".function' must be an object");
  }
  const json& f = t["function"];
  if (!has(f, "name") || !f["name"].is_string() || f["name"].get<std::string>().empty()) {
    reject("tools", "'" + at + ".function.name' must be a non-empty string");
  }
  if (!has(f, "parameters")) return {f["name"].get<std::string>(), kNoParameters};
  const json& p = f["parameters"];
  if (!p.is_object() || (p.contains("type") && p["type"] != "object")) {
    reject("tools", "'" + at + ".function.parameters' must be a JSON Schema of an object " +
                        "({\"type\": \"object\", ...})");
  }
  // The schema in the client's key order (the JSON Schema compiler sorts properties).
  return {f["name"].get<std::string>(), ot["function"]["parameters"].dump()};
}

// tool_choice: "auto" | "none" | "required" | {"type": "function", "function": {"name"}}.
void read_choice(const json& c, ToolRequest& tools) {
  if (c.is_string()) {
    const std::string s = c.get<std::string>();
    if (s == "auto") return;
    if (s == "none") {
      tools.choice = ToolChoice::kNone;
      return;
    }
    if (s == "required") {
      tools.choice = ToolChoice::kRequired;
      return;
    }
  } else if (c.is_object() && has(c, "type") && c["type"] == "function" && has(c, "function") &&
             c["function"].is_object() && has(c["function"], "name") &&
             c["function"]["name"].is_string()) {
    tools.choice = ToolChoice::kNamed;
    tools.forced_name = c["function"]["name"].get<std::string>();
    return;
  }
  reject("tool_choice",
         "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
         "\"function\": {\"name\": ...}}");
}

}  // namespace

std::string read_tool_params(const json& body, const nlohmann::ordered_json& ordered,
                             ServeRequest& req) {
  ToolRequest& tools = req.tools;
  if (has(body, "parallel_tool_calls")) {
    if (!body["parallel_tool_calls"].is_boolean()) {
      reject("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    }
    tools.parallel = body["parallel_tool_calls"].get<bool>();
  }
  if (has(body, "tool_choice")) read_choice(body["tool_choice"], tools);
  if (!has(body, "tools")) {
    if (tools.choice == ToolChoice::kRequired || tools.choice == ToolChoice::kNamed) {
      reject("tool_choice", "'tool_choice' needs 'tools'");
    }
    return "";
  }
  if (!body["tools"].is_array()) reject("tools", "'tools' must be an array");
  std::set<std::string> names;
  for (std::size_t i = 0; i < body["tools"].size(); ++i) {
    tools.functions.push_back(read_tool(body["tools"][i], ordered["tools"][i], i));
    if (!names.insert(tools.functions.back().first).second) {
      reject("tools", "function name '" + tools.functions.back().first + "' appears twice");
    }
  }
  if (tools.choice == ToolChoice::kNamed && names.count(tools.forced_name) == 0) {
    reject("tool_choice",
           "'tool_choice' names the function '" + tools.forced_name + "', which is not in 'tools'");
  }
  if (tools.choice == ToolChoice::kRequired && tools.functions.empty()) {
    reject("tool_choice", "'tool_choice' \"required\" needs at least one function in 'tools'");
  }
  if (tools.choice == ToolChoice::kNone) return "";  // the template sees no tools
  tools.parse = !tools.functions.empty();
  return ordered["tools"].dump();
}

void apply_tool_request(const detinfer::DeterministicSession& session, ServeRequest& req) {
  ToolRequest& tools = req.tools;
  if (!tools.parse) return;
  const detinfer::Tokenizer* tok = session.tokenizer();
  if (tok == nullptr) reject("tools", "tool calls need the model's tokenizer");
  const std::vector<std::int32_t>& rendered = req.prompt.ids();
  tools.context = detinfer::xxh3_64(rendered.data(), rendered.size() * sizeof(std::int32_t));
  tools.format = chat::detect_tool_call_format(
      tok->decode(req.prompt.ids(), false),
      [tok](std::string_view t) { return tok->token_to_id(std::string(t)).has_value(); });
  if (tools.choice == ToolChoice::kAuto) return;
  if (req.sources.given("response_format")) {
    reject("tool_choice", "'response_format' cannot be combined with a forced 'tool_choice'");
  }
  std::optional<std::string> name;
  if (tools.choice == ToolChoice::kNamed) name = tools.forced_name;
  if (tools.functions.size() == 1) name = tools.functions[0].first;
  std::string schema;
  if (name) {
    for (const auto& [n, params] : tools.functions) {
      if (n == *name) schema = params;
    }
  } else {
    schema = "{\"anyOf\":[";
    for (std::size_t i = 0; i < tools.functions.size(); ++i) {
      if (i > 0) schema += ",";
      schema += chat::call_object_schema(tools.format, tools.functions[i].first,
                                         tools.functions[i].second);
    }
    schema += "]}";
  }
  tools.forced = chat::forced_call(tools.format, name);
  std::vector<std::int32_t> ids = req.prompt.ids();
  const std::vector<std::int32_t> prefix = tok->encode(tools.forced->prefix, false);
  if (req.chat) req.chat->prompt_suffix = tools.forced->prefix;  // as encoded here
  ids.insert(ids.end(), prefix.begin(), prefix.end());
  req.prompt = detinfer::Prompt(ids);
  if (!req.sources.given("max_new_tokens")) {  // the context the prefix leaves
    const std::int64_t room = session.context_length() - static_cast<std::int64_t>(ids.size());
    req.config.max_new_tokens = static_cast<std::int32_t>(
        std::max<std::int64_t>(1, std::min<std::int64_t>(req.config.max_new_tokens, room)));
  }
  req.config.response_format = {detinfer::ResponseFormatType::kJsonSchema, schema};
  req.names.response_format = "tools";  // a schema the compiler refuses is the tools' fault
}

ToolMessage tool_message(const ToolRequest& tools, std::uint64_t seed, std::int32_t choice,
                         const std::string& text, detinfer::FinishReason finish) {
  ToolMessage m;
  m.finish_reason = detinfer::to_string(finish);
  m.content = text;
  m.tool_calls = json::array();
  if (!tools.parse) return m;
  const bool done = finish == detinfer::FinishReason::kStop;
  if (tools.forced && !done) return m;  // a cut forced call: its text, as generated
  const std::string whole =
      tools.forced ? tools.forced->prefix + text + tools.forced->suffix : text;
  chat::ParsedMessage parsed = chat::parse_tool_calls(whole, tools.format);
  if (parsed.calls.empty()) return m;
  if (!tools.parallel) parsed.calls.resize(1);
  m.content = parsed.content ? json(*parsed.content) : json(nullptr);
  for (std::size_t k = 0; k < parsed.calls.size(); ++k) {
    const chat::ParsedToolCall& c = parsed.calls[k];
    m.tool_calls.push_back(
        {{"id", chat::tool_call_id(seed, tools.context, choice, static_cast<std::int32_t>(k))},
         {"type", "function"},
         {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  if (done) m.finish_reason = "tool_calls";
  return m;
}

}  // namespace detinfer_cli
