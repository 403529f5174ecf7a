// A model's chat templates, parsed once, rendered for a conversation exactly as
// transformers' apply_chat_template (docs/chat.md).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "chat/template_source.h"
#include "detinfer/chat.h"

namespace detinfer::chat {

class ChatTemplates {
 public:
  ChatTemplates() = default;
  // Parses every template of the source. A template that does not parse is kept as its
  // error, thrown by render() (a session that never chats still opens).
  explicit ChatTemplates(TemplateSource source);
  ~ChatTemplates();
  ChatTemplates(ChatTemplates&&) noexcept;
  ChatTemplates& operator=(ChatTemplates&&) noexcept;

  bool empty() const { return source_.templates.empty(); }
  const TemplateSource& source() const { return source_; }

  // The template `options` select (ChatTemplateOptions::template_name). Throws
  // Error(kUnsupported) when the model has no template, Error(kInvalidArgument) for an
  // unknown name or a model with several templates and no "default".
  const std::string& select(const ChatTemplateOptions& options) const;

  // The prompt text. Variables: messages, tools (null when none), documents (null),
  // add_generation_prompt, the special tokens, then extra_variables_json (which may
  // override special tokens). Throws Error(kInvalidArgument) for malformed tools or extra
  // variables JSON (naming the field), template errors and raise_exception() messages.
  std::string render(const std::vector<ChatMessage>& messages,
                     const ChatTemplateOptions& options) const;

 private:
  struct Parsed;
  TemplateSource source_;
  std::map<std::string, std::shared_ptr<const Parsed>> parsed_;
};

}  // namespace detinfer::chat
