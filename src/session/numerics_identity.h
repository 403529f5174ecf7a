// The numerics identity of a session: every fact that can change the bits a model computes
// for the same tokens, built once at open. The KV-prefix cache salt, the result cache's
// model key and the fingerprint's numerics group are all derived from this one value, so a
// member added here reaches all three (tests/session/numerics_identity_test.cpp flips each
// member and checks both cache keys and the fingerprint). docs/architecture.md,
// "Numerics identity"; docs/cache.md; docs/fingerprint.md.
//
// Every derivation leaves out a member at its baseline value (f32 KV, weights read as
// stored, the device in canonical mode), so keys and fingerprints made before a member
// existed keep their bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/prefix_keys.h"
#include "detinfer/fingerprint.h"
#include "detinfer/hash.h"
#include "detinfer/numerics.h"
#include "detinfer/session.h"
#include "model/model.h"

namespace detinfer::session {

struct NumericsIdentity {
  NumericsMode mode = NumericsMode::kCanonical;
  std::uint32_t spec_version = 1;  // kNumericsSpecVersion of the kernels
  KvDType kv_dtype = KvDType::kF32;
  // The weights as the kernels read them: the stored dtype ("f32", "bf16", "f16"), which
  // the model fingerprint already commits to, or a format quantized at load with the
  // quantized spec version ("q8_0/qspec1"), which differs from it and is then keyed.
  std::string weight_format = "f32";
  std::string stored_weight_dtype = "f32";  // the safetensors dtype (fingerprint model group)
  std::string device_class = "cpu";         // "cpu" | "cuda"
  std::string gpu_name;                     // e.g. "NVIDIA H200"; "" on the CPU
  std::string gpu_compute_capability;       // e.g. "9.0"; "" on the CPU

  // Whether the KV and logits depend on the device: every mode but canonical on a GPU
  // (canonical numerics are the same bits on every CPU and GPU).
  bool device_matters() const;
  // The (name, value) pairs of the members that are not at their baseline, in key order.
  std::vector<std::pair<std::string, std::string>> keyed_members() const;
};

// The identity of a session opened with `options` (resolved) on `model`.
NumericsIdentity build_numerics_identity(const SessionOptions& options, const model::Model& model);

// The salt of every KV-prefix cache key: the user's cache_salt, then each keyed member.
// (Prefix roots also hash mode and spec version themselves: cache/prefix_keys.h.)
std::string prefix_salt(const NumericsIdentity& id, const std::string& cache_salt);

// The namespace of the prefix cache's roots: the model, mode, spec version and block
// geometry. Its kv_dtype stays "f32": the KV dtype is keyed through the salt (as it was
// before the identity existed).
cache::PrefixNamespace prefix_namespace(const NumericsIdentity& id,
                                        const Hash128& model_fingerprint, std::int64_t block_size,
                                        std::int64_t block_bytes);

// The model key the result cache hashes: the model fingerprint, extended by the keyed
// members when any is not at its baseline. (Mode and spec version are hashed by
// result_cache_key itself.)
Hash128 result_model_key(const NumericsIdentity& id, const Hash128& model_fingerprint);

// The result cache's key of one request (cache/result_cache.h) under this identity.
Hash128 identity_result_key(const NumericsIdentity& id, const Hash128& model_fingerprint,
                            const Hash128& tokenizer_hash, const std::vector<std::int32_t>& prompt,
                            std::string_view canonical_config);

// Fills the fingerprint's numerics group (mode, spec version, device, KV dtype, weight
// format), the model group's weight_dtype and the GPU's name and compute capability
// (`gpu_driver` is recorded beside them; it is not part of the identity). kernel_isa and
// threads are the caller's: they are recorded but do not change canonical bits.
void fill_fingerprint(const NumericsIdentity& id, const std::string& gpu_driver,
                      RunFingerprint& fp);

}  // namespace detinfer::session
