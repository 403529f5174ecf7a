#include "session/draft_model.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <optional>

#include "core/check.h"
#include "core/log.h"
#include "detinfer/tokenizer.h"
#include "engine/block_table.h"
#include "kernels/kernels.h"
#include "model/gguf_model.h"
#include "model/gguf_tokenizer.h"

namespace detinfer::session {
namespace {

constexpr const char* kField = "draft_model_path";
// Prompt tokens the draft model reads per forward pass when it catches up with a text.
constexpr std::int64_t kCatchUpChunk = 256;

// The tokenizer of `dir` (its tokenizer.json; a GGUF model: the one its metadata stands
// for, model::gguf_tokenizer), or nothing when it has none.
std::optional<Tokenizer> load_tokenizer(const std::string& dir) {
  if (model::is_gguf_model(dir)) {
    const std::unique_ptr<model::GgufModel> g = model::GgufModel::open(dir);
    if (g->metadata().find("tokenizer.ggml.model") == nullptr) return std::nullopt;
    return model::gguf_tokenizer(g->metadata());
  }
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json", ec)) {
    return std::nullopt;
  }
  return Tokenizer::load(dir);
}

// The first id the two tokenizers name differently (another token text, or special in one
// only), or nothing when every id means the same token. That is what drafting needs: the
// draft model reads the target's ids and proposes ids the target reads, so an id must
// stand for the same token in both; how each splits text (normalizer, pre-tokenizer,
// merges) never meets an id here. The files may differ: a model folder's tokenizer.json
// and a GGUF draft's metadata, or two JSON texts laid out differently.
std::optional<std::int32_t> first_different_id(const Tokenizer& a, const Tokenizer& b) {
  const std::int64_t n = std::max(a.vocab_size(), b.vocab_size());
  for (std::int64_t i = 0; i < n; ++i) {
    const auto id = static_cast<std::int32_t>(i);
    const bool in_a = i < a.vocab_size(), in_b = i < b.vocab_size();
    if (in_a != in_b) return id;
    if (a.id_to_token(id) != b.id_to_token(id) || a.is_special(id) != b.is_special(id)) return id;
  }
  return std::nullopt;
}

void check_same_tokenizer(const std::string& dir, const Tokenizer* mine,
                          const model::ModelConfig& draft, const model::ModelConfig& target) {
  if (mine != nullptr) {
    std::optional<Tokenizer> theirs;
    try {
      theirs = load_tokenizer(dir);
    } catch (const Error& e) {
      throw Error(e.code(), str_cat("SessionOptions.draft_model_path: ", dir, ": ", e.what()),
                  kField);
    }
    const std::optional<std::int32_t> at =
        theirs ? first_different_id(*theirs, *mine) : std::optional<std::int32_t>();
    if (!theirs || at) {
      throw Error(ErrorCode::kInvalidArgument,
                  str_cat("SessionOptions.draft_model_path: ", dir,
                          theirs ? str_cat(": its tokenizer differs from the model's at id ", *at)
                                 : std::string(" has no tokenizer"),
                          " (speculative decoding needs the model's tokenizer)"),
                  kField);
    }
  } else if (draft.vocab_size != target.vocab_size) {
    throw Error(ErrorCode::kInvalidArgument,
                str_cat("SessionOptions.draft_model_path: vocab_size ", draft.vocab_size,
                        " differs from the model's ", target.vocab_size,
                        " (speculative decoding needs the model's tokenizer)"),
                kField);
  }
}

}  // namespace

// One request's drafting state; released when the request's drafter goes away.
struct DraftModel::Request {
  std::shared_ptr<DraftModel> owner;
  std::vector<std::int32_t> prompt;
  std::vector<Sample> samples;
  ~Request() { owner->release(*this); }
};

DraftModel::DraftModel(std::unique_ptr<model::Model> m, std::int64_t kv_budget_bytes,
                       std::int64_t block_size)
    : model_(std::move(m)),
      pool_(model_->config(), block_size, kv_budget_bytes, model_->kv_backend(),
            model_->kv_dtype()) {}

std::shared_ptr<DraftModel> DraftModel::open(
    const std::string& dir, const model::ModelOptions& options, const Tokenizer* target_tokenizer,
    const model::ModelConfig& target,
    const std::function<std::int64_t(const model::ModelConfig&)>& kv_budget,
    std::int64_t block_size) {
  std::unique_ptr<model::Model> m;
  try {
    m = model::Model::load(dir, options);
  } catch (const Error& e) {
    throw Error(e.code(), str_cat("SessionOptions.draft_model_path: ", e.what()), kField);
  }
  check_same_tokenizer(dir, target_tokenizer, m->config(), target);
  const model::ModelConfig& c = m->config();
  const std::int64_t per_block = 2 * c.num_layers * c.num_kv_heads * c.head_dim * block_size *
                                 static_cast<std::int64_t>(core::dtype_size(m->kv_dtype()));
  return std::shared_ptr<DraftModel>(
      new DraftModel(std::move(m), std::max(kv_budget(c), per_block), block_size));
}

std::int64_t DraftModel::kv_free_blocks() const {
  std::lock_guard<std::mutex> lk(mu_);
  return pool_.free_blocks();
}

Drafter DraftModel::drafter(std::vector<std::int32_t> prompt) {
  auto r = std::make_shared<Request>();
  r->owner = shared_from_this();
  r->prompt = std::move(prompt);
  return [r](std::int32_t sample_index, const std::vector<std::int32_t>& generated,
             std::int32_t max, std::vector<std::int32_t>& out) {
    DraftModel& m = *r->owner;
    std::lock_guard<std::mutex> lk(m.mu_);
    try {
      m.propose(*r, sample_index, generated, max, out);
    } catch (const std::exception& e) {
      out.clear();  // no draft this step; the output cannot change either way
      logger().debug("draft model: no draft ({})", e.what());
    }
  };
}

void DraftModel::propose(Request& r, std::int32_t sample_index,
                         const std::vector<std::int32_t>& generated, std::int32_t max,
                         std::vector<std::int32_t>& out) {
  if (sample_index < 0 || max <= 0) return;
  if (static_cast<std::size_t>(sample_index) >= r.samples.size()) {
    r.samples.resize(static_cast<std::size_t>(sample_index) + 1);
  }
  Sample& s = r.samples[static_cast<std::size_t>(sample_index)];
  std::vector<std::int32_t> text = r.prompt;
  text.insert(text.end(), generated.begin(), generated.end());
  const auto n = static_cast<std::int64_t>(text.size());
  // The draft model's context bounds the positions its proposals take.
  const std::int64_t room = model_->config().max_position_embeddings - n;
  if (n == 0 || room <= 0) return;
  const auto k = static_cast<std::int32_t>(std::min<std::int64_t>(max, room));
  // Reuse the K/V of the longest common prefix, feeding at least the last token.
  std::int64_t keep = 0;
  const auto cached = static_cast<std::int64_t>(s.tokens.size());
  while (keep < cached && keep < n - 1 && s.tokens[keep] == text[keep]) ++keep;
  s.tokens.resize(static_cast<std::size_t>(keep));
  // A sliding window over every layer (Model::kv_horizon W): catch-up chunks of at most W
  // tokens, and after each one the blocks no later feed can see are released (holes, as
  // the engine does: docs/session.md, "Sliding windows and the KV cache"). The text only
  // grows and at least its last token is fed again, so every later feed starts at n - 1
  // or after: a rejected draft never needs a released block.
  const std::int64_t horizon = model_->kv_horizon();
  const std::int64_t chunk = horizon > 0 ? std::min(kCatchUpChunk, horizon) : kCatchUpChunk;
  const float* row = nullptr;
  for (std::int64_t at = keep; at < n; at += chunk) {
    const std::int64_t end = std::min(n, at + chunk);
    row = feed(s, std::vector<std::int32_t>(text.begin() + at, text.begin() + end), at);
    s.tokens.insert(s.tokens.end(), text.begin() + at, text.begin() + end);
    engine::release_before(
        pool_, s.blocks,
        model::first_live_block(horizon, std::min(end, n - 1), pool_.block_size()));
  }
  const std::int64_t vocab = model_->config().vocab_size;
  for (std::int32_t j = 0; j < k; ++j) {
    out.push_back(static_cast<std::int32_t>(kernels::argmax(row, vocab)));  // ties: lowest id
    if (j + 1 == k) break;
    row = feed(s, {out.back()}, n + j);
    s.tokens.push_back(out.back());
  }
}

const float* DraftModel::feed(Sample& s, const std::vector<std::int32_t>& tokens,
                              std::int64_t start) {
  engine::ensure_blocks(pool_, s.blocks, start + static_cast<std::int64_t>(tokens.size()));
  model::SequenceStep step;
  step.tokens = tokens;
  step.start_pos = start;
  step.block_table = s.blocks;
  logits_.clear();
  model_->forward({step}, pool_, logits_);
  DETINFER_INTERNAL_CHECK(static_cast<std::int64_t>(logits_.size()) == model_->config().vocab_size);
  return logits_.data();
}

void DraftModel::release(Request& r) {
  std::lock_guard<std::mutex> lk(mu_);
  for (Sample& s : r.samples) engine::release_blocks(pool_, s.blocks);
}

}  // namespace detinfer::session
