// Speculative decoding's draft model (docs/speculative.md, "The draft-model drafter"): a
// smaller model with the target's tokenizer, opened by the session beside the target
// (SessionOptions::draft_model_path), with a KV pool of its own. A request with
// GenerationConfig::draft_with_model gets a drafter (EngineRequest::drafter) that runs the
// draft model greedily over the request's text and proposes its next tokens. Whatever it
// proposes, the engine's verification keeps the output that of plain decoding; the draft
// model only decides how many tokens a verify pass gets right.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "detinfer/tokenizer.h"
#include "model/model.h"

namespace detinfer::session {

// EngineRequest::drafter's type.
using Drafter =
    std::function<void(std::int32_t sample_index, const std::vector<std::int32_t>& generated,
                       std::int32_t max, std::vector<std::int32_t>& out)>;

class DraftModel : public std::enable_shared_from_this<DraftModel> {
 public:
  // Loads the draft model from `dir` with `options` (the target's mode, threads, device,
  // KV dtype). It must share the target's tokenizer (`target_tokenizer`, the session's;
  // null when the target has none): every id names the same token in both (a folder's
  // tokenizer.json or a GGUF file's metadata), or, without one, the same vocab_size. Errors
  // name "draft_model_path": kInvalidArgument for a mismatch, the loader's error otherwise.
  // The KV pool holds kv_budget(the draft model's config) bytes (at least one block of
  // `block_size` tokens).
  static std::shared_ptr<DraftModel> open(
      const std::string& dir, const model::ModelOptions& options, const Tokenizer* target_tokenizer,
      const model::ModelConfig& target,
      const std::function<std::int64_t(const model::ModelConfig&)>& kv_budget,
      std::int64_t block_size);

  // The drafter of one request whose prompt is `prompt`. It keeps, per sample, the draft
  // model's K/V of the text so far (reused across steps up to the first token that
  // differs) and releases it when the request's last copy of the drafter is destroyed.
  // A draft model whose every layer slides holds only the blocks its window can still
  // see (Model::kv_horizon), whatever the text's length.
  // It never throws: a draft it cannot make (pool full, past the draft model's context,
  // a failed forward pass) is no draft.
  Drafter drafter(std::vector<std::int32_t> prompt);

  const model::ModelConfig& config() const { return model_->config(); }
  std::int64_t kv_capacity_blocks() const { return pool_.capacity(); }
  std::int64_t kv_free_blocks() const;

 private:
  struct Sample {
    std::vector<std::int32_t> tokens;  // the text whose K/V is in `blocks`
    std::vector<std::int32_t> blocks;
  };
  struct Request;

  DraftModel(std::unique_ptr<model::Model> m, std::int64_t kv_budget_bytes,
             std::int64_t block_size);
  // Greedy proposals after prompt + generated, at most `max` (under mu_).
  void propose(Request& r, std::int32_t sample_index, const std::vector<std::int32_t>& generated,
               std::int32_t max, std::vector<std::int32_t>& out);
  // Feeds `tokens` at `start` of sample `s` (growing its blocks) and returns the last
  // position's logits row.
  const float* feed(Sample& s, const std::vector<std::int32_t>& tokens, std::int64_t start);
  void release(Request& r);

  std::unique_ptr<model::Model> model_;
  mutable std::mutex mu_;  // pool_ and logits_: drafters run on the engine thread, but a
                           // request's state may be destroyed on another
  model::KvCachePool pool_;
  std::vector<float> logits_;
};

}  // namespace detinfer::session
