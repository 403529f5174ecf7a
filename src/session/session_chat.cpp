// DeterministicSession's chat: templates from the model folder, generation defaults from
// generation_config.json (docs/chat.md).
#include <ctime>

#include "chat/chat_messages.h"
#include "chat/generation_defaults.h"
#include "chat/template_source.h"
#include "core/check.h"
#include "decode/config_check.h"
#include "detinfer/session.h"
#include "detinfer/transcript.h"
#include "session/session_impl.h"

namespace detinfer {

void DeterministicSession::Impl::load_chat(const std::string& model_dir,
                                           const session::ModelMetadata& metadata) {
  const model::ModelConfig& mc = model->config();
  chat_templates = chat::ChatTemplates(metadata.templates);
  const chat::GenerationDefaults d =
      session::read_generation_defaults(model_dir, metadata, mc.max_position_embeddings);
  try {
    decode::validate_config(d.config, {mc.vocab_size, mc.max_position_embeddings});
  } catch (const Error& e) {
    throw Error(ErrorCode::kCorrupt,
                model_dir +
                    (metadata.gguf ? " (general.sampling.*): " : "/generation_config.json: ") +
                    e.message(),
                e.field());
  }
  generation_defaults = d.config;
  if (!tokenizer) return;
  tokenizer_hash = tokenizer->hash();
  const chat::TemplateSource& src = chat_templates.source();
  if (!chat_templates.empty() && !src.from_tokenizer_config) {
    // The template has its own file: the tokenizer hash alone would not cover it.
    Hasher h;
    h.update_field("detinfer.tokenizer+chat_template.v1");
    h.update_hash(tokenizer_hash).update_hash(src.hash);
    tokenizer_hash = h.digest128();
  }
}

std::string DeterministicSession::apply_chat_template(const std::vector<ChatMessage>& messages,
                                                      const ChatTemplateOptions& options) const {
  return impl_->chat_templates.render(messages, options);
}

std::vector<std::int32_t> DeterministicSession::encode_chat(
    const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) const {
  if (!impl_->tokenizer)
    fail(ErrorCode::kUnsupported,
         "the model has no tokenizer (no tokenizer.json, or a GGUF file without "
         "tokenizer.ggml.model)");
  const core::ByteBudget::Lease lease(
      impl_->chat_budget, kChatCostPerByte * chat::conversation_bytes(messages, options),
      kChatTrimBytes);
  const std::string text = apply_chat_template(messages, options);
  // Too long before tokenizing (issue 33): with at most B bytes of text per token the
  // prompt has >= ceil(bytes / B) tokens, and prepare() refuses any prompt of
  // context_length() tokens or more, so bytes >= context * B is refused here, unencoded.
  const auto per_token = static_cast<std::int64_t>(impl_->tokenizer->max_text_bytes_per_token());
  const std::int64_t context = context_length();
  const auto bytes = static_cast<std::int64_t>(text.size());
  if (per_token > 0 && context > 0 && bytes / per_token >= context) {
    fail(ErrorCode::kInvalidArgument, "the conversation renders to ", bytes,
         " bytes of prompt text, at least ", (bytes + per_token - 1) / per_token,
         " tokens (one token covers at most ", per_token,
         " bytes of text with this tokenizer); the context holds at most ", context,
         " (prompt + generated)");
  }
  return impl_->tokenizer->encode(text, /*add_special_tokens=*/false);
}

GenerationResult DeterministicSession::chat(const std::vector<ChatMessage>& messages,
                                            const GenerationConfig& config,
                                            const ChatTemplateOptions& options,
                                            TokenCallback on_token) {
  // The clock is read once, so the transcript renders the prompt this call rendered.
  ChatTemplateOptions o = options;
  if (!o.now_unix_seconds) o.now_unix_seconds = static_cast<std::int64_t>(std::time(nullptr));
  GenerationResult r = generate(encode_chat(messages, o), config, std::move(on_token));
  if (!r.transcript_json.empty()) {  // the messages form of the receipt (format /2)
    Transcript t = Transcript::from_json(r.transcript_json);
    t.chat = transcript_chat(messages, o);
    r.transcript_json = t.to_json();
  }
  return r;
}

bool DeterministicSession::has_chat_template() const { return !impl_->chat_templates.empty(); }

GenerationConfig DeterministicSession::default_generation_config() const {
  return impl_->generation_defaults;
}

}  // namespace detinfer
