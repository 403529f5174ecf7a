// detinfer::devtools::compute_logits: one prefill over a prompt, every position's logits.
#include "core/check.h"
#include "devtools/model_tools.h"
#include "model/model.h"

namespace detinfer::devtools {

LogitsResult compute_logits(const LogitsRequest& request) {
  if (request.tokens.empty()) fail(ErrorCode::kInvalidArgument, "compute_logits: no tokens");
  model::ModelOptions options;
  options.mode = request.mode;
  options.threads = request.threads;
  options.weights = request.weights;
  const std::unique_ptr<model::Model> model = model::Model::load(request.model_dir, options);
  const model::ModelConfig& c = model->config();
  const auto t = static_cast<std::int64_t>(request.tokens.size());
  constexpr std::int64_t kBlock = 16;
  const std::int64_t blocks = (t + kBlock - 1) / kBlock;
  const std::int64_t block_bytes = c.num_layers * 2 * kBlock * c.num_kv_heads * c.head_dim * 4;
  model::KvCachePool kv(c, kBlock, blocks * block_bytes);
  model::SequenceStep step;
  step.tokens = request.tokens;
  step.all_logits = true;
  for (std::int64_t b = 0; b < blocks; ++b) step.block_table.push_back(kv.allocate());
  LogitsResult r;
  model->forward({step}, kv, r.logits);
  r.num_tokens = t;
  r.vocab_size = c.vocab_size;
  r.model_fingerprint = model->fingerprint().hex();
  return r;
}

}  // namespace detinfer::devtools
