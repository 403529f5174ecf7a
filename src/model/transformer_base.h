// What the canonical and the fast forward passes share: the Model accessors, validation
// of a batch against the config and the KV pool, and the flattening of a batch into rows.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/backend.h"
#include "model/model.h"
#include "model/rope_table.h"
#include "model/weight_loader.h"

namespace detinfer::model {

class TransformerBase : public Model {
 public:
  const ModelConfig& config() const override { return config_; }
  const Hash128& fingerprint() const override { return fingerprint_; }
  NumericsMode mode() const override { return options_.mode; }
  int threads() const override { return options_.threads; }
  std::int64_t weight_bytes() const override { return weight_bytes_; }
  // Weights as kept, plus the RoPE table and step buffers grown so far.
  std::int64_t resident_bytes() const override {
    return resident_bytes_ + rope_bytes_.load() + scratch_bytes_.load();
  }
  std::int64_t decode_read_bytes() const override { return decode_read_bytes_; }
  ModelLoadStats load_stats() const override { return load_stats_; }
  core::DType kv_dtype() const override { return options_.kv_dtype; }
  // Every mode reads only the keys a row sees: the canonical kernels and, on CUDA outside
  // canonical mode, the split kernel (it skips the splits before the window); the libtorch
  // fast model (fast_model.cpp) gathers only the window's keys.
  std::int64_t kv_horizon() const override { return model::kv_horizon(config_); }
  void set_load_seconds(double s) { load_stats_.load_seconds = s; }

  void forward_rows(const std::vector<SequenceStep>& batch, KvCachePool& kv,
                    const LogitsAppend& append) final;

 protected:
  TransformerBase(const ModelConfig& config, const ModelOptions& options);
  // Runs the layers over a validated plan; appends logits rows (forward_rows).
  virtual void run(const BatchPlan& plan, KvCachePool& kv, const LogitsAppend& append) = 0;
  // embed_only_bytes: resident bytes of an embedding table that only serves row lookups
  // (0 when the table is also the lm_head); a decode step reads one row of it.
  // unrouted_bytes: resident weight bytes one decode row does not read (mixture of experts:
  // the experts it is not routed to, (E - k) / E of each sparse layer's experts).
  void set_loaded(const LoadedWeights& w, std::int64_t resident_bytes,
                  std::int64_t embed_only_bytes = 0, std::int64_t unrouted_bytes = 0);

  // Bytes of the buffers a forward pass keeps between steps (activations), for
  // resident_bytes(); set by run() when it grows them.
  void set_scratch_bytes(std::int64_t bytes) { scratch_bytes_.store(bytes); }

  ModelConfig config_;
  ModelOptions options_;
  RopeTable rope_;
  float attention_scale_;
  // Gemma 3: the windowed layers' table (rope_local_theta, no scaling); null otherwise.
  std::unique_ptr<RopeTable> rope_local_;

 private:
  BatchPlan make_plan(const std::vector<SequenceStep>& batch, const KvCachePool& kv) const;

  Hash128 fingerprint_;
  std::int64_t weight_bytes_ = 0;
  std::int64_t resident_bytes_ = 0;
  std::int64_t decode_read_bytes_ = 0;
  // Read by resident_bytes() from any thread while forward() grows them.
  std::atomic<std::int64_t> rope_bytes_{0};
  std::atomic<std::int64_t> scratch_bytes_{0};
  ModelLoadStats load_stats_;
};

}  // namespace detinfer::model
