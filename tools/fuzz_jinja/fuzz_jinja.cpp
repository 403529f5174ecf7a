// libFuzzer target for the chat template engine: the input is a template, parsed and
// rendered against a fixed conversation with tools. Any detinfer::Error is a clean
// rejection; anything else (crash, sanitizer report, other exception, timeout) is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "detinfer/error.h"
#include "jinja/template.h"

namespace {

const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Zürich? {{ x }} <|im_end|>"},
      {"role": "assistant", "content": "", "reasoning_content": "call the tool",
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
      {"role": "tool", "content": "{\"t\": 21.5}", "tool_call_id": "c1"},
      {"role": "assistant", "content": [{"type": "text", "text": "21.5 C"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "w",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}}],
    "documents": null, "add_generation_prompt": true, "enable_thinking": false,
    "bos_token": "<s>", "eos_token": "</s>", "n": 3, "f": 1.5, "big": 9223372036854775807
  })");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  detinfer::jinja::TemplateLimits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_loop_iterations = 1 << 14;
  limits.max_work_bytes = 1 << 24;
  try {
    const auto tpl = detinfer::jinja::Template::parse(
        std::string_view(reinterpret_cast<const char*>(data), size), limits);
    tpl.render(context(), 1767225600);
  } catch (const detinfer::Error&) {
  }
  return 0;
}
