// The emulated CUDA model tests' scenarios (cuda_model_emulation_test.cpp,
// cuda_invariant_gemma_emulation_test.cpp): a model on the CUDA backend over the emulated
// kernels, batched steps of several sequences in chosen compositions and block layouts,
// and bitwise comparison of their logits rows.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "detinfer/numerics.h"
#include "model/cuda_backend.h"
#include "model/model.h"
#include "model/model_factories.h"
#include "model/model_test_util.h"
// After the model headers: defines the CUDA keywords and includes the kernels' device code.
#include "cuda/emulated_cuda_ops.h"

namespace detinfer::testing {

// One sequence of a scenario: its prompt and the tokens it decodes afterwards.
struct SeqSpec {
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> decode;
};

// One step: for each listed sequence, how many of its next tokens to feed (0 = absent).
struct StepSpec {
  std::vector<std::size_t> order;  // which sequences, in batch order
  std::vector<std::size_t> feed;   // tokens each one feeds
  bool all_logits = false;         // every fed row's logits, not only the last
};

// Logits rows per sequence, in the order they were produced.
using SeqLogits = std::vector<std::vector<std::vector<float>>>;

// Runs a scenario on `model` with a fresh pool of blocks of `block_size` tokens; the blocks
// of each sequence are allocated in `alloc_order` (so layouts differ between runs). When
// `kv` is given, it receives every sequence's KV blocks in sequence order, as the prefix
// cache exports them (KvCachePool::export_block).
inline SeqLogits run_scenario(model::Model& model, const std::vector<SeqSpec>& seqs,
                              const std::vector<StepSpec>& steps, std::int64_t block_size,
                              const std::vector<std::size_t>& alloc_order,
                              std::vector<std::vector<std::uint8_t>>* kv = nullptr) {
  const model::ModelConfig& c = model.config();
  model::KvCachePool pool(c, block_size, std::int64_t{1} << 22, model.kv_backend(),
                          model.kv_dtype());
  std::vector<std::vector<std::int32_t>> tables(seqs.size());
  for (const std::size_t s : alloc_order) {
    const std::size_t total = seqs[s].prompt.size() + seqs[s].decode.size();
    while (static_cast<std::int64_t>(tables[s].size()) * block_size <
           static_cast<std::int64_t>(total)) {
      tables[s].push_back(pool.allocate());
    }
  }
  std::vector<std::size_t> fed(seqs.size(), 0);
  SeqLogits out(seqs.size());
  for (const StepSpec& st : steps) {
    std::vector<model::SequenceStep> batch;
    for (std::size_t i = 0; i < st.order.size(); ++i) {
      const std::size_t s = st.order[i];
      std::vector<std::int32_t> all = seqs[s].prompt;
      all.insert(all.end(), seqs[s].decode.begin(), seqs[s].decode.end());
      model::SequenceStep step;
      step.tokens.assign(all.begin() + static_cast<std::ptrdiff_t>(fed[s]),
                         all.begin() + static_cast<std::ptrdiff_t>(fed[s] + st.feed[i]));
      step.start_pos = static_cast<std::int64_t>(fed[s]);
      step.block_table = tables[s];
      step.all_logits = st.all_logits;
      batch.push_back(std::move(step));
      fed[s] += st.feed[i];
    }
    std::vector<float> logits;
    model.forward(batch, pool, logits);
    std::size_t row = 0;
    for (std::size_t i = 0; i < st.order.size(); ++i) {
      const std::size_t rows = st.all_logits ? st.feed[i] : 1;
      for (std::size_t r = 0; r < rows; ++r, ++row) {
        const auto* p = logits.data() + row * static_cast<std::size_t>(c.vocab_size);
        out[st.order[i]].emplace_back(p, p + c.vocab_size);
      }
    }
  }
  for (std::size_t s = 0; kv != nullptr && s < tables.size(); ++s) {
    for (const std::int32_t b : tables[s]) {
      kv->emplace_back(static_cast<std::size_t>(pool.block_bytes()));
      pool.export_block(b, kv->back().data());
    }
  }
  return out;
}

inline ::testing::AssertionResult same_bits(const SeqLogits& got, const SeqLogits& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sequence count";
  for (std::size_t s = 0; s < got.size(); ++s) {
    if (got[s].size() != want[s].size())
      return ::testing::AssertionFailure() << "sequence " << s << ": row count differs";
    for (std::size_t r = 0; r < got[s].size(); ++r) {
      if (std::memcmp(got[s][r].data(), want[s][r].data(), got[s][r].size() * 4) != 0) {
        std::size_t i = 0;
        while (std::memcmp(&got[s][r][i], &want[s][r][i], 4) == 0) ++i;
        return ::testing::AssertionFailure() << "sequence " << s << " row " << r << " logit " << i
                                             << ": " << got[s][r][i] << " vs " << want[s][r][i];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// The last-token rows of each sequence's prompt and decode steps (what a generation uses):
// comparable between scenarios that chunk or batch differently.
inline SeqLogits generation_rows(const SeqLogits& all, const std::vector<SeqSpec>& seqs,
                                 bool all_rows) {
  SeqLogits out(all.size());
  for (std::size_t s = 0; s < all.size(); ++s) {
    const std::size_t n = seqs[s].decode.size() + 1;
    if (!all_rows) {
      out[s].assign(all[s].end() - static_cast<std::ptrdiff_t>(n), all[s].end());
    } else {
      out[s] = all[s];
    }
  }
  return out;
}

// Two sequences; composition A: chunked prefill of 0, then 0's last chunk batched with
// 1's whole prefill (all logits rows), then batched decode. Composition B: 1 and 0
// prefilled together in one step (reverse order, other block layout), decode 0 alone
// then batched.
struct Scenario {
  std::vector<SeqSpec> seqs;
  std::vector<StepSpec> a, b;
};

inline Scenario make_scenario(std::int64_t vocab) {
  Scenario sc;
  sc.seqs = {{test_tokens(13, vocab, 1), test_tokens(2, vocab, 2)},
             {test_tokens(6, vocab, 3), test_tokens(2, vocab, 4)}};
  sc.a = {
      {{0}, {5}, false}, {{0, 1}, {8, 6}, true}, {{0, 1}, {1, 1}, false}, {{1, 0}, {1, 1}, false}};
  sc.b = {{{1, 0}, {6, 13}, false}, {{0}, {1}, false}, {{0, 1}, {1, 1}, false}, {{1}, {1}, false}};
  return sc;
}

// The model of `dir` on the CUDA backend over the emulated kernels, in `mode`.
inline std::unique_ptr<model::Model> emulated_cuda_model(const std::string& dir,
                                                         NumericsMode mode) {
  model::ModelOptions mo;
  mo.mode = mode;
  mo.device = parse_device("cuda:0");
  return model::load_model_on(
      dir, mo, model::make_cuda_backend_over(std::make_shared<EmulatedCudaOps>(), mode, "cuda:0"));
}

}  // namespace detinfer::testing
