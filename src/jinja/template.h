// A Jinja engine for Hugging Face chat templates: renders a template exactly as
// transformers' apply_chat_template does (Python Jinja2 in an immutable sandbox with
// trim_blocks, lstrip_blocks, the loop-controls extension, the `generation` tag, the
// globals raise_exception / strftime_now and transformers' tojson). docs/chat.md,
// "Template engine", lists the supported subset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace detinfer::jinja {

// Bounds that make hostile templates fail cleanly (Error kResourceExhausted).
struct TemplateLimits {
  std::int32_t max_depth = 256;  // nesting of blocks/expressions at parse; of evaluation
                                 // frames (statements, expressions, macro calls) at render
  std::size_t max_output_bytes = 16u << 20;             // rendered text, and any one string value
  std::int64_t max_loop_iterations = 1 << 22;           // all loops of one render together, and
                                                        // the length of any list one render builds
  std::size_t max_source_bytes = 1u << 20;              // template text
  std::int64_t max_work_bytes = std::int64_t{1} << 30;  // bytes all string operations of
                                                        // one render may produce together
};

struct TemplateProgram;  // the parsed template (internal)

// Immutable after parse; render() is const and safe to call from many threads at once.
class Template {
 public:
  // Throws Error(kInvalidArgument, "chat template line L, column C: <what>",
  // field="chat_template") on a syntax error, Error(kResourceExhausted, ...) when the
  // source is larger than max_source_bytes or nests deeper than max_depth.
  static Template parse(std::string_view source, const TemplateLimits& limits = {});

  // context: the template variables (messages, tools, add_generation_prompt, bos_token,
  // ...). An ordered_json keeps object keys in insertion order, as Python dicts do (tool
  // schemas print in the order they were given). now_unix_seconds: the time
  // strftime_now() formats, in UTC (the caller passes it so that renders are reproducible).
  // Errors:
  //  - raise_exception(msg) in the template: Error(kInvalidArgument, msg, field="messages");
  //  - other template errors at render (undefined attribute of an undefined value, wrong
  //    types, unknown filter): Error(kInvalidArgument, <Jinja2's message>,
  //    field="chat_template");
  //  - a limit reached: Error(kResourceExhausted, ..., field="chat_template").
  std::string render(const nlohmann::ordered_json& context, std::int64_t now_unix_seconds) const;

  const TemplateLimits& limits() const noexcept;

 private:
  explicit Template(std::shared_ptr<const TemplateProgram> program);
  std::shared_ptr<const TemplateProgram> program_;
};

}  // namespace detinfer::jinja
