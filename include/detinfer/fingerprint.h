// RunFingerprint: everything that produced one generation, grouped so that a diff can say
// which group differs, plus the digests that prove what came out (docs/fingerprint.md,
// JSON schema docs/fingerprint.schema.json, id "detinfer.fingerprint/1").
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "detinfer/environment.h"
#include "detinfer/export.h"
#include "detinfer/generation.h"
#include "detinfer/hash.h"

namespace detinfer {

// The schema id this build writes and the only one it reads.
inline constexpr const char kFingerprintSchema[] = "detinfer.fingerprint/1";

// --- digests ---------------------------------------------------------------------------
// Step digest: XXH3-64 (seed 0) of one step's raw fp32 logits row (model output before
// any logits processor), vocab_size values in token-id order, as little-endian bits.
DETINFER_API std::uint64_t logits_digest(const float* logits, std::size_t vocab_size);
// One link of the chain: xxh3_64(prev as LE u64 || step_digest as LE u64).
DETINFER_API std::uint64_t chain_digest(std::uint64_t prev, std::uint64_t step_digest);
// The chain over all steps, starting from 0 (0 when there are no steps).
DETINFER_API std::uint64_t chain_digest(const std::vector<std::uint64_t>& step_digests);
// XXH3-64 of the prompt ids as little-endian int32.
DETINFER_API std::uint64_t prompt_hash(const std::vector<std::int32_t>& prompt_tokens);

// --- groups ----------------------------------------------------------------------------
// How much of the output a fingerprint records: the level of a RunFingerprint and what a
// session records per request (RecorderOptions::level). The C API's fingerprint_level
// uses the same numbers.
enum class RecordLevel : std::uint8_t {
  kOff = 0,     // nothing (never the level of a RunFingerprint)
  kFinal = 1,   // tokens and chain digests only
  kSteps = 2,   // + per-step digests
  kLogits = 3,  // + every step's full logits row (debugging: ~vocab*4*4/3 bytes per step)
};
// What a session records unless told otherwise, in C++ (SessionOptions::recorder) and C
// (dti_session_options_default).
inline constexpr RecordLevel kDefaultRecordLevel = RecordLevel::kSteps;
// "off" | "final" | "steps" | "logits".
DETINFER_API const char* to_string(RecordLevel level);
// The inverse of to_string; throws Error(kInvalidArgument) for any other name.
DETINFER_API RecordLevel parse_record_level(const std::string& name);

struct DETINFER_API FingerprintLibrary {
  std::string version;
  std::string git_revision;
  std::string compiler;
  std::string build_type;
  std::string build_flags;
};

struct DETINFER_API FingerprintNumerics {
  std::string mode = "canonical";  // "canonical" | "fast" | "device_invariant"
  int spec_version = 0;            // numerics spec version of the kernels used
  std::string kernel_isa;          // "scalar" | "avx2" | "avx512" | "cuda" | "torch"
  int threads = 1;                 // kernel threads
  std::string device = "cpu";      // "cpu" | "cuda"
  std::string kv_dtype = "f32";    // KV storage: "f32" | "bf16" | "f16" (JSON: only if not f32)
  // The weights as the kernels read them when that is not the stored dtype
  // (model.weight_dtype), e.g. a format converted at load; "" = as stored (JSON: only if set).
  std::string weight_format;
};

struct DETINFER_API FingerprintGpu {
  std::string name;
  std::string compute_capability;  // e.g. "9.0"
  std::string driver;
};

struct DETINFER_API FingerprintDevice {
  std::string cpu_model;
  std::vector<std::string> cpu_flags;
  std::uint32_t hardware_threads = 0;
  std::optional<FingerprintGpu> gpu;  // when CUDA is used
};

struct DETINFER_API FingerprintEnvironment {
  std::string os;
  std::string glibc_version;
  std::string libtorch_version;
  // Relevant environment variables that were set (relevant_env_vars()).
  std::map<std::string, std::string> env_vars;
  // XXH3-64 over the fields above (environment_hash()); to_json writes it and from_json
  // checks it.
  std::uint64_t hash() const;
};

struct DETINFER_API FingerprintModel {
  Hash128 fingerprint;       // docs/fingerprint-model.md
  std::string architecture;  // config.json "architectures"[0]
  std::string weight_dtype;  // "f32" | "bf16" | "f16"
};

struct DETINFER_API FingerprintRequest {
  // The prompt ids; may be left out (store_prompt_tokens = false): then only the hash
  // and length identify the prompt.
  std::optional<std::vector<std::int32_t>> prompt_tokens;
  std::uint64_t prompt_hash = 0;
  std::int64_t prompt_length = 0;
  // Normalized: defaults resolved by the session (stop_token_ids filled in); `seed` is
  // cleared here and recorded below as the seed actually used.
  GenerationConfig config;
  std::uint64_t seed = 0;
};

struct DETINFER_API FingerprintSequence {
  std::vector<std::int32_t> tokens;
  FinishReason finish_reason = FinishReason::kLength;
  std::vector<std::uint64_t> step_digests;  // one per token (level >= kSteps)
  std::uint64_t chain_digest = 0;           // chain_digest(step_digests)
  // Each step's raw logits row (level == kLogits), one per token.
  std::vector<std::vector<float>> logits;
};

struct DETINFER_API RunFingerprint {
  FingerprintLibrary library;
  FingerprintNumerics numerics;
  FingerprintDevice device;
  FingerprintEnvironment environment;
  FingerprintModel model;
  Hash128 tokenizer_hash;
  FingerprintRequest request;
  RecordLevel level = RecordLevel::kSteps;  // never kOff
  std::vector<FingerprintSequence> sequences;
  CacheUsage cache;  // recorded for operators; never part of any digest or of diff

  // Sets prompt_tokens/prompt_hash/prompt_length from the ids.
  void set_prompt(const std::vector<std::int32_t>& ids, bool store_tokens = true);

  // One JSON object (indent < 0: a single line, as in JSON Lines).
  std::string to_json(int indent = -1) const;
  // Strict: throws Error(kUnsupported) for another schema id (naming it and the one
  // supported), Error(kCorrupt) naming the field for malformed JSON, a missing,
  // unknown or mistyped field, a value out of range, or digests that do not match the
  // data they cover (prompt hash, environment hash, chain digest). Never crashes.
  static RunFingerprint from_json(std::string_view json);

  // A 64-bit key of the request (model, tokenizer, prompt, config, seed): equal for two
  // runs of the same request. Used for deterministic sampling.
  std::uint64_t request_key() const;
};

// Loads a file holding one fingerprint (a JSON document) or several (JSON Lines, as the
// recorder writes). Throws Error(kNotFound) when unreadable, else as from_json with the
// line number.
DETINFER_API std::vector<RunFingerprint> load_fingerprints(const std::string& path);

// The environment variables that can change numerics or threading and are recorded
// when set: DETINFER_CPU_ISA, DETINFER_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS,
// OPENBLAS_NUM_THREADS, CUDA_VISIBLE_DEVICES, CUBLAS_WORKSPACE_CONFIG,
// NVIDIA_TF32_OVERRIDE, TORCH_ALLOW_TF32_CUBLAS_OVERRIDE.
DETINFER_API std::map<std::string, std::string> relevant_env_vars();

// Fills the library, device and environment groups (and numerics.spec_version) from an
// EnvironmentInfo and a set of environment variables.
DETINFER_API void set_host_groups(RunFingerprint& fp, const EnvironmentInfo& env,
                                  const std::map<std::string, std::string>& env_vars);
// The same from collect_environment() and relevant_env_vars() of this process.
DETINFER_API void set_host_groups(RunFingerprint& fp);

// A request's fingerprint: `base` (library, numerics, device, environment, model and
// tokenizer groups, filled once per session) plus the request and output of `result`.
// `config` is the normalized config the session ran; its seed is ignored (result.seed
// is recorded). Sequences take tokens, finish reason, step digests and chain digest
// (Sequence::digest); logits rows are left for the caller (RecordLevel::kLogits). The
// level is kSteps; FingerprintRecorder::record trims it to the recorder's level.
DETINFER_API RunFingerprint fingerprint_of(const RunFingerprint& base,
                                           const GenerationConfig& config,
                                           const GenerationResult& result,
                                           bool store_prompt_tokens = true);

// Whether two runs produced the same output: same sequences with the same tokens,
// finish reasons and chain digests, and equal step digests where both recorded them.
DETINFER_API bool same_output(const RunFingerprint& a, const RunFingerprint& b);

}  // namespace detinfer
