// The model fingerprint (stable, sensitive) and the KV cache pool.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "detinfer/error.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "model/tensor_store.h"

namespace detinfer {
namespace {

using testing::read_bytes;
using testing::scratch_dir;
using testing::tiny_options;
using testing::write_bytes;

std::string fingerprint_of(const std::string& dir, NumericsMode mode = NumericsMode::kCanonical) {
  return Model::load(dir, {mode, 1, {}})->fingerprint().hex();
}

TEST(ModelFingerprint, StableAcrossRunsModesAndFolders) {
  const std::string a = scratch_dir("fa");
  const std::string b = scratch_dir("fb");
  make_tiny_model(tiny_options(TinyArch::kQwen3, DType::kBF16, a, 11));
  make_tiny_model(tiny_options(TinyArch::kQwen3, DType::kBF16, b, 11));
  const std::string fa = fingerprint_of(a);
  EXPECT_EQ(fa.size(), 32u);
  EXPECT_EQ(fa, fingerprint_of(a));
  if (DETINFER_TEST_WITH_TORCH) {
    EXPECT_EQ(fa, fingerprint_of(a, NumericsMode::kFast));
  }
  EXPECT_EQ(fa, fingerprint_of(b));
}

TEST(ModelFingerprint, GoldenValue) {
  // The generator, the file format and the fingerprint recipe are all machine-independent;
  // a change here is a format change (docs/fingerprint-model.md). vocab < 259: no
  // tokenizer, so the value does not depend on the tiny tokenizer's training.
  const std::string dir = scratch_dir("golden");
  TinyModelOptions o = tiny_options(TinyArch::kQwen3, DType::kBF16, dir, 11);
  o.vocab = 200;
  make_tiny_model(o);
  EXPECT_EQ(fingerprint_of(dir), "9c75ce71b16fd97a22c550bd868a6c7f");
}

TEST(ModelFingerprint, SensitiveToOneWeightByteAndOneConfigField) {
  const std::string dir = scratch_dir("fs");
  make_tiny_model(tiny_options(TinyArch::kLlama, DType::kF32, dir, 5));
  const std::string before = fingerprint_of(dir);
  {
    std::uint64_t offset = 0;
    {
      const TensorStore store = TensorStore::open(dir);
      offset = store.get("model.layers.1.mlp.down_proj.weight").file_offset + 17;
    }
    std::string bytes = read_bytes(dir + "/model.safetensors");
    bytes[offset] = static_cast<char>(bytes[offset] ^ 0x01);
    write_bytes(dir + "/model.safetensors", bytes);
    EXPECT_NE(before, fingerprint_of(dir));
    bytes[offset] = static_cast<char>(bytes[offset] ^ 0x01);
    write_bytes(dir + "/model.safetensors", bytes);
    EXPECT_EQ(before, fingerprint_of(dir));
  }
  std::ifstream in(dir + "/config.json");
  nlohmann::json c = nlohmann::json::parse(in);
  c["rope_theta"] = 10001.0;
  write_bytes(dir + "/config.json", c.dump());
  EXPECT_NE(before, fingerprint_of(dir));
}

ModelConfig small_config() {
  ModelConfig c;
  c.num_layers = 2;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  return c;
}

TEST(KvCachePool, AllocatesWithinBudgetAndRefcounts) {
  const ModelConfig c = small_config();
  KvCachePool pool(c, 16, 10 * 2 * 2 * 16 * 8 * 4 + 100);
  EXPECT_EQ(pool.block_bytes(), 2 * 2 * 16 * 8 * 4);
  EXPECT_EQ(pool.capacity(), 10);
  EXPECT_EQ(pool.allocate(), 0);  // lowest id first
  const std::int32_t b = pool.allocate();
  EXPECT_EQ(b, 1);
  pool.retain(b);
  EXPECT_EQ(pool.refcount(b), 2);
  pool.release(b);
  EXPECT_EQ(pool.free_blocks(), 8);
  pool.release(b);
  EXPECT_EQ(pool.free_blocks(), 9);
  EXPECT_THROW(pool.release(b), Error);
  EXPECT_THROW(pool.refcount(10), Error);
  for (int i = 0; i < 9; ++i) pool.allocate();
  try {
    pool.allocate();
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
  }
  EXPECT_THROW(KvCachePool(c, 16, 10), Error);
}

TEST(KvCachePool, ExportImportRoundTrip) {
  const ModelConfig c = small_config();
  KvCachePool pool(c, 4, 1 << 20);
  const std::int32_t a = pool.allocate(), b = pool.allocate();
  const std::int64_t n = pool.block_size() * pool.kv_stride();
  for (std::int64_t l = 0; l < 2; ++l) {
    for (std::int64_t i = 0; i < n; ++i) {
      pool.k_pool(l)[a * n + i] = static_cast<float>(l * 1000 + i) + 0.5f;
      pool.v_pool(l)[a * n + i] = -static_cast<float>(l * 1000 + i) - 0.25f;
    }
  }
  std::vector<char> buf(static_cast<std::size_t>(pool.block_bytes()));
  pool.export_block(a, buf.data());
  pool.import_block(b, buf.data());
  for (std::int64_t l = 0; l < 2; ++l) {
    EXPECT_EQ(0, std::memcmp(pool.k_pool(l) + a * n, pool.k_pool(l) + b * n, n * 4));
    EXPECT_EQ(0, std::memcmp(pool.v_pool(l) + a * n, pool.v_pool(l) + b * n, n * 4));
  }
}

}  // namespace
}  // namespace detinfer
