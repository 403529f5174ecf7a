#include "session/request_prep.h"

#include "core/check.h"
#include "decode/config_check.h"
#include "detinfer/philox.h"

namespace detinfer::session {

RequestPrep::RequestPrep(const model::ModelConfig& config, const Tokenizer* tokenizer,
                         std::uint64_t seed_key)
    : config_(config), tokenizer_(tokenizer), seed_key_(seed_key) {}

std::vector<std::int32_t> RequestPrep::tokenize(const Prompt& prompt) const {
  std::vector<std::int32_t> ids;
  if (prompt.is_text()) {
    if (tokenizer_ == nullptr) {
      fail(ErrorCode::kUnsupported,
           "a text prompt needs a tokenizer, and the model has none (no tokenizer.json, or a "
           "GGUF file without tokenizer.ggml.model); pass token ids");
    }
    ids = tokenizer_->encode(prompt.text());
  } else {
    ids = prompt.ids();
  }
  if (ids.empty()) fail(ErrorCode::kInvalidArgument, "the prompt is empty");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= config_.vocab_size) {
      fail(ErrorCode::kInvalidArgument, "prompt token ", i, " is ", ids[i],
           ", outside the vocabulary [0, ", config_.vocab_size, ")");
    }
  }
  const auto len = static_cast<std::int64_t>(ids.size());
  if (len >= config_.max_position_embeddings) {
    fail(ErrorCode::kInvalidArgument, "the prompt has ", len, " tokens; the context holds at most ",
         config_.max_position_embeddings, " (prompt + generated)");
  }
  return ids;
}

engine::EngineRequest RequestPrep::prepare(const Prompt& prompt, const GenerationConfig& config,
                                           TokenCallback on_token, RequestPolicy policy) {
  if (closed()) fail(ErrorCode::kUnavailable, "the session is closed");
  engine::EngineRequest r;
  try {
    r.prompt = tokenize(prompt);
  } catch (const Error& e) {
    if (!e.field().empty()) throw;
    throw Error(e.code(), e.message(), "prompt");
  }
  const auto len = static_cast<std::int64_t>(r.prompt.size());
  const std::int64_t ctx = config_.max_position_embeddings;
  decode::validate_config(config, {config_.vocab_size, ctx});
  if (len + config.max_new_tokens > ctx) {
    throw Error(ErrorCode::kInvalidArgument,
                str_cat("GenerationConfig.max_new_tokens must be in [1, ", ctx - len, "] for this ",
                        len, "-token prompt (context ", ctx, "), got ", config.max_new_tokens),
                "max_new_tokens");
  }
  r.config = config;
  if (!r.config.stop_token_ids) r.config.stop_token_ids = config_.eos_token_ids;
  if (config.seed) {
    r.seed = *config.seed;
  } else if (config.temperature > 0.0f) {
    const PhiloxCounter c = philox_block(seed_key_, seed_counter_.fetch_add(1), 0);
    // 53 bits: a drawn seed survives JSON parsers that read numbers as doubles.
    r.seed = ((static_cast<std::uint64_t>(c[1]) << 32) | c[0]) & ((std::uint64_t{1} << 53) - 1);
  }
  r.config.seed = r.seed;
  r.id = next_id_.fetch_add(1);
  r.on_token = std::move(on_token);
  r.use_caches = policy.use_caches;
  r.observed = policy.observed;
  return r;
}

}  // namespace detinfer::session
