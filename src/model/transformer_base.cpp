#include "model/transformer_base.h"

#include <cmath>

#include "core/check.h"

namespace detinfer::model {

TransformerBase::TransformerBase(const ModelConfig& config, const ModelOptions& options)
    : config_(config),
      options_(options),
      rope_(config),
      // Rounded once from double: the same float on every machine.
      attention_scale_(
          static_cast<float>(1.0 / std::sqrt(config.query_pre_attn_scalar > 0.0
                                                 ? config.query_pre_attn_scalar
                                                 : static_cast<double>(config.head_dim)))) {
  if (config.rope_local_theta > 0.0) {
    ModelConfig local = config;
    local.rope_theta = config.rope_local_theta;
    local.rope_scaling = RopeScaling{};
    rope_local_ = std::make_unique<RopeTable>(local);
  }
  if (options.threads < 1 || options.threads > 1024) {
    fail(ErrorCode::kInvalidArgument, "ModelOptions::threads = ", options.threads,
         " is outside [1, 1024]");
  }
}

void TransformerBase::set_loaded(const LoadedWeights& w, std::int64_t resident_bytes,
                                 std::int64_t embed_only_bytes, std::int64_t unrouted_bytes) {
  fingerprint_ = w.fingerprint;
  weight_bytes_ = w.weight_bytes;
  resident_bytes_ = resident_bytes;
  const std::int64_t row = config_.vocab_size > 0 ? embed_only_bytes / config_.vocab_size : 0;
  decode_read_bytes_ = resident_bytes - embed_only_bytes + row - unrouted_bytes;
  load_stats_.fingerprint_seconds = w.fingerprint_seconds;
  config_.weight_dtype = w.embed_dtype;
}

BatchPlan TransformerBase::make_plan(const std::vector<SequenceStep>& batch,
                                     const KvCachePool& kv) const {
  if (kv.num_layers() != config_.num_layers ||
      kv.kv_stride() != config_.num_kv_heads * config_.head_dim) {
    fail(ErrorCode::kInvalidArgument, "KV cache pool was built for a different model shape");
  }
  BatchPlan p;
  const std::int64_t bs = kv.block_size();
  for (std::size_t s = 0; s < batch.size(); ++s) {
    const SequenceStep& st = batch[s];
    const auto n = static_cast<std::int64_t>(st.tokens.size());
    if (n == 0) fail(ErrorCode::kInvalidArgument, "batch sequence ", s, " has no new tokens");
    if (st.start_pos < 0 || st.start_pos + n > config_.max_position_embeddings) {
      fail(ErrorCode::kInvalidArgument, "batch sequence ", s, ": positions [", st.start_pos, ", ",
           st.start_pos + n, ") exceed the context length ", config_.max_position_embeddings);
    }
    const std::int64_t end = st.start_pos + n;
    const auto nb = static_cast<std::int64_t>(st.block_table.size());
    if (nb * bs < end) {
      fail(ErrorCode::kInvalidArgument, "batch sequence ", s, ": block table of ", nb,
           " blocks cannot hold ", end, " tokens");
    }
    // Released blocks (-1) only where no row of the step can see a key.
    const std::int64_t live = first_live_block(kv_horizon(), st.start_pos, bs);
    for (std::int64_t i = 0; i < nb; ++i) {
      const std::int32_t b = st.block_table[static_cast<std::size_t>(i)];
      if ((b < 0 && !(b == -1 && i < live)) || b >= kv.capacity()) {
        fail(ErrorCode::kInvalidArgument, "batch sequence ", s, ": block id ", b,
             " is outside the pool [0, ", kv.capacity(), ")",
             b == -1 ? " (a released block that the step's rows can still see)" : "");
      }
    }
    p.seqs.push_back({p.rows, n, st.start_pos, st.block_table.data(), nb});
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int32_t tok = st.tokens[static_cast<std::size_t>(i)];
      if (tok < 0 || tok >= config_.vocab_size) {
        fail(ErrorCode::kInvalidArgument, "batch sequence ", s, ": token id ", tok,
             " is outside the vocabulary [0, ", config_.vocab_size, ")");
      }
      const std::int64_t pos = st.start_pos + i;
      p.tokens.push_back(tok);
      p.positions.push_back(pos);
      p.kv_slots.push_back(
          static_cast<std::int64_t>(st.block_table[static_cast<std::size_t>(pos / bs)]) * bs +
          pos % bs);
      p.num_keys.push_back(pos + 1);
      if (st.all_logits || i == n - 1) p.logit_rows.push_back(p.rows + i);
    }
    p.rows += n;
  }
  return p;
}

void TransformerBase::forward_rows(const std::vector<SequenceStep>& batch, KvCachePool& kv,
                                   const LogitsAppend& append) {
  if (batch.empty()) return;
  // The pool's elements are what the kernels read: another storage type would be misread.
  if (kv.kv_dtype() != options_.kv_dtype) {
    throw Error(
        ErrorCode::kInvalidArgument,
        str_cat("forward: the KV pool stores ", core::to_string(kv.kv_dtype()),
                " but the model was loaded with kv_dtype ", core::to_string(options_.kv_dtype)),
        "kv_dtype");
  }
  const BatchPlan plan = make_plan(batch, kv);
  std::int64_t max_pos = 0;
  for (const std::int64_t p : plan.positions) max_pos = std::max(max_pos, p);
  rope_.ensure(max_pos + 1);
  if (rope_local_ != nullptr) rope_local_->ensure(max_pos + 1);
  rope_bytes_.store(rope_.bytes() + (rope_local_ != nullptr ? rope_local_->bytes() : 0));
  run(plan, kv, append);
}

}  // namespace detinfer::model
