// libFuzzer target for the whole chat request path (docs/server.md, "Fuzzing"): the input
// is a /v1/chat/completions body; it goes through the hardened ordered JSON reader, the
// messages parser, the real Qwen3 or Llama 3.1 chat template (tests/jinja/fixtures) and
// the byte-level BPE tokenizer fixture, as `detinfer serve` does before sampling. Byte 0
// picks the template and add_generation_prompt. Any detinfer::Error is a clean rejection;
// anything else (crash, sanitizer report, other exception, timeout) is a bug.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_templates.h"
#include "core/json_parse.h"
#include "detinfer/chat.h"
#include "detinfer/error.h"
#include "detinfer/tokenizer.h"

namespace {

using Json = nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

detinfer::chat::ChatTemplates templates_for(const char* name) {
  detinfer::chat::TemplateSource src;
  src.templates["default"] =
      read_file(std::string(DETINFER_JINJA_FIXTURES) + "/templates/" + name + ".jinja");
  src.origin = name;
  src.special_tokens = Json{{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|im_end|>"}};
  return detinfer::chat::ChatTemplates(std::move(src));
}

struct Fixtures {
  std::vector<detinfer::chat::ChatTemplates> templates;
  detinfer::Tokenizer tokenizer = detinfer::Tokenizer::from_json(
      read_file(std::string(DETINFER_TOKENIZER_FIXTURES) + "/byte_level.json"));
  Fixtures() {
    templates.push_back(templates_for("qwen3"));
    templates.push_back(templates_for("llama3_1"));
  }
};

// The template options a chat body sets (tools, chat_template_kwargs), as the server's.
detinfer::ChatTemplateOptions options_of(const Json& body, std::uint8_t sel) {
  detinfer::ChatTemplateOptions o;
  o.add_generation_prompt = (sel & 2) != 0;
  o.now_unix_seconds = 1767225600;
  const auto tools = body.find("tools");
  if (tools != body.end() && tools->is_array()) o.tools_json = tools->dump();
  const auto kwargs = body.find("chat_template_kwargs");
  if (kwargs != body.end() && kwargs->is_object()) o.extra_variables_json = kwargs->dump();
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Fixtures fx;
  if (size == 0) return 0;
  const std::uint8_t sel = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const Json body = detinfer::core::parse_json_ordered(
        text, {64, std::size_t{1} << 20, true}, detinfer::ErrorCode::kInvalidArgument, "body");
    if (!body.is_object()) return 0;
    const auto messages = body.find("messages");
    if (messages == body.end()) return 0;
    const std::vector<detinfer::ChatMessage> parsed =
        detinfer::chat_messages_from_json(messages->dump());
    const std::string prompt =
        fx.templates[sel % fx.templates.size()].render(parsed, options_of(body, sel));
    (void)fx.tokenizer.encode(prompt, /*add_special_tokens=*/false);
  } catch (const detinfer::Error&) {
  }
  return 0;
}
