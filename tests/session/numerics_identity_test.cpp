// Issue 27 (one numerics identity): the prefix-cache key, the result-cache key and the
// fingerprint are all derived from NumericsIdentity. Flipping any member changes both
// cache keys and the fingerprint; the device of a canonical session changes neither key
// (canonical KV and results are shared by every CPU and GPU) but is recorded. Keys of
// baseline sessions, and of the members that existed before the identity, keep the
// bytes the hand-written derivations produced.
#include "session/numerics_identity.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "cache/prefix_keys.h"
#include "cache/result_cache.h"

namespace detinfer::session {
namespace {

const Hash128 kModel = Hasher().update_field("model").digest128();
const Hash128 kTokenizer = Hasher().update_field("tokenizer").digest128();
const std::vector<std::int32_t> kPrompt = {1, 2, 3, 4, 5, 6, 7, 8};

struct Keys {
  Hash128 prefix;  // the key of the first block of kPrompt
  Hash128 result;
  std::string fingerprint;
};

Keys keys_of(const NumericsIdentity& id) {
  Keys k;
  const Hash128 root =
      prefix_root(prefix_namespace(id, kModel, 4, 256), prefix_salt(id, "user-salt"));
  k.prefix = cache::prefix_block_keys(root, kPrompt.data(), kPrompt.size(), 4).at(0);
  k.result = identity_result_key(id, kModel, kTokenizer, kPrompt, "{\"max_new_tokens\":4}");
  RunFingerprint fp;
  fill_fingerprint(id, "13.0", fp);
  k.fingerprint = fp.to_json();
  return k;
}

NumericsIdentity fast_cuda() {
  NumericsIdentity id;
  id.mode = NumericsMode::kFast;
  id.device_class = "cuda";
  id.gpu_name = "NVIDIA H200";
  id.gpu_compute_capability = "9.0";
  return id;
}

struct Flip {
  const char* member;
  NumericsIdentity (*base)();
  std::function<void(NumericsIdentity&)> edit;
};

// One flip per member, from a base where the member matters.
std::vector<Flip> flips() {
  auto canonical = [] { return NumericsIdentity{}; };
  return {
      {"mode", canonical, [](auto& id) { id.mode = NumericsMode::kFast; }},
      {"mode (GPU)", fast_cuda, [](auto& id) { id.mode = NumericsMode::kDeviceInvariant; }},
      {"spec_version", canonical, [](auto& id) { id.spec_version = 2; }},
      {"kv_dtype", canonical, [](auto& id) { id.kv_dtype = KvDType::kBF16; }},
      {"kv_dtype (f16)", canonical, [](auto& id) { id.kv_dtype = KvDType::kF16; }},
      {"weight_format", canonical, [](auto& id) { id.weight_format = "q8"; }},
      {"stored_weight_dtype", canonical, [](auto& id) { id.stored_weight_dtype = "bf16"; }},
      {"device_class",
       [] {
         NumericsIdentity id;
         id.mode = NumericsMode::kFast;
         return id;
       },
       [](auto& id) { id.device_class = "cuda"; }},
      {"gpu_name", fast_cuda, [](auto& id) { id.gpu_name = "NVIDIA A100"; }},
      {"gpu_compute_capability", fast_cuda, [](auto& id) { id.gpu_compute_capability = "8.0"; }},
  };
}

TEST(NumericsIdentity, EveryMemberChangesBothCacheKeysAndTheFingerprint) {
  for (const Flip& f : flips()) {
    NumericsIdentity a = f.base();
    NumericsIdentity b = a;
    f.edit(b);
    const Keys ka = keys_of(a);
    const Keys kb = keys_of(b);
    EXPECT_NE(ka.prefix, kb.prefix) << f.member;
    EXPECT_NE(ka.result, kb.result) << f.member;
    EXPECT_NE(ka.fingerprint, kb.fingerprint) << f.member;
  }
}

TEST(NumericsIdentity, CanonicalKeysDoNotDependOnTheDeviceButTheFingerprintRecordsIt) {
  const NumericsIdentity cpu;
  NumericsIdentity gpu;
  gpu.device_class = "cuda";
  gpu.gpu_name = "NVIDIA H200";
  gpu.gpu_compute_capability = "9.0";
  NumericsIdentity other_gpu = gpu;
  other_gpu.gpu_name = "NVIDIA A100";
  const Keys kc = keys_of(cpu);
  for (const NumericsIdentity& id : {gpu, other_gpu}) {
    const Keys k = keys_of(id);
    EXPECT_EQ(kc.prefix, k.prefix) << id.gpu_name;
    EXPECT_EQ(kc.result, k.result) << id.gpu_name;
    EXPECT_NE(kc.fingerprint, k.fingerprint) << id.gpu_name;
  }
  EXPECT_NE(keys_of(gpu).fingerprint, keys_of(other_gpu).fingerprint);
}

// The bytes the hand-written derivations (before the identity) produced.
TEST(NumericsIdentity, KeysKeepThePreviousBytes) {
  NumericsIdentity id;
  EXPECT_EQ(prefix_salt(id, "s"), "s");
  EXPECT_EQ(result_model_key(id, kModel), kModel);
  id.kv_dtype = KvDType::kBF16;
  EXPECT_EQ(prefix_salt(id, "s"), "s\x1fkv_dtype=bf16");
  EXPECT_EQ(result_model_key(id, kModel),
            Hasher().update_hash(kModel).update_field("kv_dtype").update_field("bf16").digest128());
  NumericsIdentity gpu = fast_cuda();
  gpu.kv_dtype = KvDType::kF16;
  EXPECT_EQ(prefix_salt(gpu, ""),
            "\x1f"
            "fast@NVIDIA H200 sm_9.0\x1fkv_dtype=f16");
  cache::PrefixNamespace want;
  want.model_fingerprint = kModel;
  want.mode = NumericsMode::kFast;
  want.spec_version = 1;
  want.block_size = 4;
  EXPECT_EQ(prefix_root(prefix_namespace(gpu, kModel, 4, 256), "x"), prefix_root(want, "x"));
  EXPECT_EQ(identity_result_key(NumericsIdentity{}, kModel, kTokenizer, kPrompt, "c"),
            cache::result_cache_key(kModel, NumericsMode::kCanonical, 1, kTokenizer, kPrompt, "c"));
}

TEST(NumericsIdentity, FingerprintGroupsComeFromTheIdentity) {
  NumericsIdentity id = fast_cuda();
  id.kv_dtype = KvDType::kF16;
  id.stored_weight_dtype = "bf16";
  id.weight_format = "q8";
  RunFingerprint fp;
  fill_fingerprint(id, "13.0", fp);
  EXPECT_EQ(fp.numerics.mode, "fast");
  EXPECT_EQ(fp.numerics.spec_version, 1);
  EXPECT_EQ(fp.numerics.device, "cuda");
  EXPECT_EQ(fp.numerics.kv_dtype, "f16");
  EXPECT_EQ(fp.numerics.weight_format, "q8");
  EXPECT_EQ(fp.model.weight_dtype, "bf16");
  ASSERT_TRUE(fp.device.gpu.has_value());
  EXPECT_EQ(fp.device.gpu->name, "NVIDIA H200");
  EXPECT_EQ(fp.device.gpu->compute_capability, "9.0");
  EXPECT_EQ(fp.device.gpu->driver, "13.0");
  // Weights read as stored: no weight_format in the group (nor in the JSON).
  id.weight_format = "bf16";
  fill_fingerprint(id, "13.0", fp);
  EXPECT_EQ(fp.numerics.weight_format, "");
  EXPECT_EQ(fp.to_json().find("weight_format"), std::string::npos);
}

}  // namespace
}  // namespace detinfer::session
