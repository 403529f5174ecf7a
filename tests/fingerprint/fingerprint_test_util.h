// Test helper: valid fingerprints filled with Philox-derived, non-trivial data.
#pragma once

#include <string>
#include <vector>

#include "detinfer/fingerprint.h"
#include "detinfer/philox.h"

namespace detinfer::testing {

// A logits row of `vocab` values in about [-8, 8) from (seed, stream = row id).
inline std::vector<float> random_logits(std::uint64_t seed, std::uint64_t row, std::size_t vocab) {
  std::vector<float> v(vocab);
  for (std::size_t i = 0; i < vocab; ++i) v[i] = philox_uniform(seed, row, i, 0) * 16.0f - 8.0f;
  return v;
}

// A complete fingerprint: `n_seq` sequences of `n_tokens` tokens each, whose step digests
// are the digests of random logits rows (kept at RecordLevel::kLogits).
inline RunFingerprint make_fingerprint(std::uint64_t seed, int n_seq = 2, int n_tokens = 6,
                                       std::size_t vocab = 32) {
  RunFingerprint fp;
  EnvironmentInfo env;
  env.library_version = "0.1.0";
  env.git_revision = "abc1234";
  env.compiler = "GNU 12.2.0";
  env.build_type = "Release";
  env.build_flags = "-O2 -ffp-contract=off";
  env.numerics_spec_version = 1;
  env.cpu_model = "Test CPU \"quoted\" \\ model";
  env.cpu_flags = {"avx2", "fma", "avx512f"};
  env.hardware_threads = 8;
  env.libtorch_version = "2.1.2";
  env.glibc_version = "2.36";
  env.os = "Linux 6.1.0 x86_64";
  set_host_groups(fp, env, {{"DETINFER_CPU_ISA", "avx2"}, {"OMP_NUM_THREADS", "4"}});
  fp.numerics.mode = "canonical";
  fp.numerics.kernel_isa = "avx2";
  fp.numerics.threads = 2;
  fp.model.fingerprint = xxh3_128("model-" + std::to_string(seed));
  fp.model.architecture = "Qwen2ForCausalLM";
  fp.model.weight_dtype = "bf16";
  fp.tokenizer_hash = xxh3_128("tokenizer");
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 9; ++i)
    prompt.push_back(static_cast<std::int32_t>(philox_bits(seed, 99, i, 0) % vocab));
  fp.set_prompt(prompt);
  fp.request.config.max_new_tokens = n_tokens;
  fp.request.config.temperature = 0.7f;
  fp.request.config.top_k = 20;
  fp.request.config.top_p = 0.9f;
  fp.request.config.num_return_sequences = n_seq;
  fp.request.config.stop_token_ids = std::vector<std::int32_t>{2, 7};
  fp.request.config.stop_strings = {"\n\n", "END"};
  fp.request.seed = 0xFFFFFFFFFFFFFFF0ull - seed;
  fp.level = RecordLevel::kLogits;
  for (int s = 0; s < n_seq; ++s) {
    FingerprintSequence seq;
    for (int t = 0; t < n_tokens; ++t) {
      auto row = random_logits(seed, static_cast<std::uint64_t>(s * 1000 + t), vocab);
      seq.tokens.push_back(static_cast<std::int32_t>(philox_bits(seed, 7 + s, t, 1) % vocab));
      seq.step_digests.push_back(logits_digest(row.data(), row.size()));
      seq.logits.push_back(std::move(row));
    }
    seq.chain_digest = chain_digest(seq.step_digests);
    seq.finish_reason = s == 0 ? FinishReason::kLength : FinishReason::kStop;
    fp.sequences.push_back(std::move(seq));
  }
  fp.cache.prefix_cached_tokens = 4;
  fp.cache.result_cache_hit = false;
  return fp;
}

// The same fingerprint at a lower level (drops what that level does not record).
inline RunFingerprint at_level(RunFingerprint fp, RecordLevel level) {
  fp.level = level;
  for (auto& s : fp.sequences) {
    if (level < RecordLevel::kSteps) s.step_digests.clear();
    if (level < RecordLevel::kLogits) s.logits.clear();
  }
  return fp;
}

}  // namespace detinfer::testing
