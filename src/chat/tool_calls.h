// Tool calls in a model's output (docs/tools.md): the three syntaxes detinfer reads
// (Hermes/Qwen `<tool_call>` JSON, Llama 3.x JSON, Mistral `[TOOL_CALLS]`), which one a
// model speaks (from its rendered chat template and its vocabulary), the parser that turns
// generated text into OpenAI-shaped calls plus the remaining content, and the text that
// opens and closes a call the server forces (tool_choice "required" or a named function).
// Pure functions of their inputs: no session, no server.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace detinfer::chat {

enum class ToolCallFormat : std::uint8_t {
  kHermes = 0,   // <tool_call>{"name": .., "arguments": {..}}</tool_call>, possibly several
  kLlama3 = 1,   // the whole message is {"name": .., "parameters": {..}} (after <|python_tag|>)
  kMistral = 2,  // [TOOL_CALLS] [{"name": .., "arguments": {..}}, ...]
  // Mistral tokenizers v11 and later (Mistral Small 3.2, Magistral, Devstral):
  // [TOOL_CALLS]name[ARGS]{..}, once per call. Parsed like kMistral (both forms).
  kMistralArgs = 3,
  kPythonic = 4,  // Llama 3.2 / 4 pythonic: [f(a=1, b="x"), g()]; Llama 3 JSON also read
};

// "hermes", "llama3_json", "mistral", "mistral_args", "pythonic"
const char* to_string(ToolCallFormat f);

// The syntax of a model: `rendered` is its chat template's text for a conversation with
// tools, `has_token` says whether a text is one token of its vocabulary. First match:
// "[ARGS]" in the text or as a token -> Mistral [ARGS]; "[TOOL_CALLS]" or
// "[AVAILABLE_TOOLS]" in the text or the token [TOOL_CALLS] -> Mistral; "<tool_call>" in
// the text or as a token -> Hermes; "[func_name1(" (the pythonic templates' instructions)
// or "<|python_start|>" in the text, or <|python_start|> as a token -> pythonic;
// "<|python_tag|>" or "<|start_header_id|>" in the text or <|python_tag|> as a token ->
// Llama 3; else Hermes.
// (Generated text is decoded without special tokens: Llama's <|python_tag|> and Mistral's
// [TOOL_CALLS] are then absent, so the parsers accept calls without them.)
ToolCallFormat detect_tool_call_format(std::string_view rendered,
                                       const std::function<bool(std::string_view)>& has_token);

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // compact JSON text of an object, keys in the model's order
};

struct ParsedMessage {
  std::optional<std::string> content;  // text outside the calls; unset when only whitespace
  std::vector<ParsedToolCall> calls;
};

// Splits generated text into tool calls and content. A call is taken only when its JSON
// parses (core::parse_json rules) into an object with a string "name" and an object
// "arguments" (Llama 3: "parameters"; either key is accepted in every format; absent: {});
// everything else, tags included, stays content. Braces and tags inside JSON strings do
// not end a call. Mistral also reads `name[ARGS]{arguments}` calls; pythonic reads a
// message that is only a list of calls with keyword arguments whose values are Python
// literals (turned into JSON), else it reads Llama 3 JSON. Never throws on any text.
ParsedMessage parse_tool_calls(std::string_view text, ToolCallFormat format);

// How much of a message still being generated is content whatever follows: the text
// before the first place a call could start (Hermes "<tool_call>", Mistral "[TOOL_CALLS]",
// or a trailing part of one of them; Mistral: nothing while the message starts with "[" or
// is still only a name, possibly followed by "{" or "["; Llama 3: nothing when the message
// starts, after whitespace, with "{" or with what could become "<|python_tag|>"; pythonic:
// also "[" or what could become "<|python_start|>"). 0 while that text is
// only whitespace. A stream may send this much as content before the end:
// parse_tool_calls(whole text).content then starts with it.
std::size_t content_prefix_length(std::string_view partial, ToolCallFormat format);

// A call the server forces. With `name` the prompt ends with the call opened up to its
// arguments (`prefix`), the model generates the arguments object alone (constrained by
// the function's parameters schema) and `suffix` closes it. Without a name the prefix
// opens the call's JSON (Hermes "<tool_call>\n", Mistral "[TOOL_CALLS] [", Llama 3
// nothing) and the model generates the whole call object (see call_object_schema).
// Mistral [ARGS] with a name of [A-Za-z0-9_.-] opens "[TOOL_CALLS]name[ARGS]" (otherwise,
// and without a name, the older array form); pythonic is forced into Llama 3's JSON form.
struct ForcedCall {
  std::string prefix;
  std::string suffix;
};
ForcedCall forced_call(ToolCallFormat format, const std::optional<std::string>& name);

// The JSON Schema of one call object of `format` for a function:
// {"type":"object","properties":{"name":{"const":name},"arguments" (Llama 3, pythonic:
// "parameters"): parameters},"required":[both],"additionalProperties":false}.
std::string call_object_schema(ToolCallFormat format, const std::string& name,
                               const std::string& parameters_schema);

// "call_" + 24 hex digits: a pure function of the request's seed, `context` (a hash of
// what the call answers; the server: the prompt's token ids, so the turns of one
// conversation get different ids), the choice and the call's position in it. Ids repeat
// exactly when the request is repeated.
std::string tool_call_id(std::uint64_t seed, std::uint64_t context, std::int32_t choice,
                         std::int32_t call);

}  // namespace detinfer::chat
