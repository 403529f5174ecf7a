// A fake Model for engine tests: each position's state is a hash of the previous
// position's state (read back from the KV pool, so a wrong block table or a bad fork
// changes the output) and the token; the logits row is a hash of the state. A pure
// function of the token sequence, cheap enough for ThreadSanitizer runs.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "core/check.h"
#include "detinfer/hash.h"
#include "model/model.h"

namespace detinfer::testing {

constexpr std::int64_t kFakeVocab = 64;
constexpr std::int32_t kFakeEos = 1;
constexpr std::int32_t kFakePoisonToken = 62;  // forward() throws on a prompt starting so

inline model::ModelConfig fake_config() {
  model::ModelConfig c;
  c.vocab_size = kFakeVocab;
  c.hidden_size = 8;
  c.intermediate_size = 8;
  c.num_layers = 1;
  c.num_heads = 1;
  c.num_kv_heads = 1;
  c.head_dim = 4;
  c.max_position_embeddings = 512;
  c.eos_token_ids = {kFakeEos};
  return c;
}

inline std::uint64_t fake_next_state(std::uint64_t prev, std::int32_t token) {
  const std::uint64_t buf[2] = {prev, static_cast<std::uint64_t>(token)};
  return xxh3_64(buf, sizeof(buf));
}

inline void fake_row(std::uint64_t state, float* row) {
  for (std::int64_t t = 0; t < kFakeVocab; ++t) {
    const std::uint64_t buf[2] = {state, static_cast<std::uint64_t>(t)};
    row[t] = static_cast<float>(xxh3_64(buf, sizeof(buf)) % 2001) * 0.01f - 10.0f;
  }
}

// The logits after the whole sequence, computed directly.
inline std::vector<float> fake_logits(const std::vector<std::int32_t>& seq) {
  std::uint64_t s = 0;
  for (const std::int32_t t : seq) s = fake_next_state(s, t);
  std::vector<float> row(kFakeVocab);
  fake_row(s, row.data());
  return row;
}

class FakeModel : public model::Model {
 public:
  const model::ModelConfig& config() const override { return config_; }
  const Hash128& fingerprint() const override { return fp_; }
  NumericsMode mode() const override { return NumericsMode::kCanonical; }
  int threads() const override { return host_threads_; }
  // host_parallel_for's ranges: one per thread, each on a thread of its own (real
  // concurrency, for ThreadSanitizer) when threads > 1; calls counted.
  void set_host_threads(int threads) { host_threads_ = threads; }
  int host_calls() const { return host_calls_; }
  void host_parallel_for(std::int64_t n,
                         const std::function<void(std::int64_t, std::int64_t)>& fn) override {
    ++host_calls_;
    std::vector<std::thread> ts;
    for (std::int64_t t = 0; t < host_threads_; ++t) {
      const std::int64_t i0 = t * n / host_threads_, i1 = (t + 1) * n / host_threads_;
      if (i1 > i0) ts.emplace_back([&fn, i0, i1] { fn(i0, i1); });
    }
    for (std::thread& t : ts) t.join();
  }
  std::int64_t weight_bytes() const override { return 0; }
  std::int64_t resident_bytes() const override { return 0; }

  void forward_rows(const std::vector<model::SequenceStep>& batch, model::KvCachePool& kv,
                    const LogitsAppend& append) override {
    for (const model::SequenceStep& s : batch) {
      if (s.start_pos == 0 && s.tokens.at(0) == kFakePoisonToken) {
        fail(ErrorCode::kInternal, "fake model: poison token");
      }
    }
    for (const model::SequenceStep& s : batch) {
      std::uint64_t state = s.start_pos == 0 ? 0 : load(kv, s.block_table, s.start_pos - 1);
      for (std::size_t i = 0; i < s.tokens.size(); ++i) {
        state = fake_next_state(state, s.tokens[i]);
        store(kv, s.block_table, s.start_pos + static_cast<std::int64_t>(i), state);
        if (s.all_logits || i + 1 == s.tokens.size()) {  // every position's row, or the last
          fake_row(state, append(kFakeVocab));
        }
      }
    }
  }

 private:
  static float* slot(model::KvCachePool& kv, const std::vector<std::int32_t>& table,
                     std::int64_t pos) {
    const std::int64_t bs = kv.block_size();
    DETINFER_INTERNAL_CHECK(pos / bs < static_cast<std::int64_t>(table.size()));
    return static_cast<float*>(kv.k_pool(0)) + (table[pos / bs] * bs + pos % bs) * kv.kv_stride();
  }
  static void store(model::KvCachePool& kv, const std::vector<std::int32_t>& table,
                    std::int64_t pos, std::uint64_t state) {
    float* p = slot(kv, table, pos);
    for (int i = 0; i < 4; ++i) p[i] = static_cast<float>((state >> (16 * i)) & 0xffff);
  }
  static std::uint64_t load(model::KvCachePool& kv, const std::vector<std::int32_t>& table,
                            std::int64_t pos) {
    const float* p = slot(kv, table, pos);
    std::uint64_t s = 0;
    for (int i = 0; i < 4; ++i) s |= static_cast<std::uint64_t>(p[i]) << (16 * i);
    return s;
  }

  model::ModelConfig config_ = fake_config();
  Hash128 fp_;
  int host_threads_ = 1;
  int host_calls_ = 0;
};

}  // namespace detinfer::testing
