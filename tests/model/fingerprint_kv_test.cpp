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
  return model::Model::load(dir, {mode, 1, {}})->fingerprint().hex();
}

TEST(ModelFingerprint, StableAcrossRunsModesAndFolders) {
  const std::string a = scratch_dir("fa");
  const std::string b = scratch_dir("fb");
  devtools::make_tiny_model(tiny_options(devtools::TinyArch::kQwen3, core::DType::kBF16, a, 11));
  devtools::make_tiny_model(tiny_options(devtools::TinyArch::kQwen3, core::DType::kBF16, b, 11));
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
  devtools::TinyModelOptions o =
      tiny_options(devtools::TinyArch::kQwen3, core::DType::kBF16, dir, 11);
  o.vocab = 200;
  devtools::make_tiny_model(o);
  EXPECT_EQ(fingerprint_of(dir), "9c75ce71b16fd97a22c550bd868a6c7f");
}

TEST(ModelFingerprint, SensitiveToOneWeightByteAndOneConfigField) {
  const std::string dir = scratch_dir("fs");
  devtools::make_tiny_model(tiny_options(devtools::TinyArch::kLlama, core::DType::kF32, dir, 5));
  const std::string before = fingerprint_of(dir);
  {
    std::uint64_t offset = 0;
    {
      const model::TensorStore store = model::TensorStore::open(dir);
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

model::ModelConfig small_config() {
  model::ModelConfig c;
  c.num_layers = 2;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  return c;
}

TEST(KvCachePool, AllocatesWithinBudgetAndRefcounts) {
  const model::ModelConfig c = small_config();
  model::KvCachePool pool(c, 16, 10 * 2 * 2 * 16 * 8 * 4 + 100);
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
  EXPECT_THROW(model::KvCachePool(c, 16, 10), Error);
}

// Export/import move the bytes as stored: 4 per element for f32, 2 for bf16/f16 (the
// payload a prefix-cache tier keeps is block_bytes(), half the f32 size).
TEST(KvCachePool, ExportImportRoundTrip) {
  const model::ModelConfig c = small_config();
  for (core::DType dt : {core::DType::kF32, core::DType::kBF16, core::DType::kF16}) {
    model::KvCachePool pool(c, 4, 1 << 20, nullptr, dt);
    const std::int32_t a = pool.allocate(), b = pool.allocate();
    const std::int64_t eb = pool.elem_bytes();
    EXPECT_EQ(eb, dt == core::DType::kF32 ? 4 : 2);
    const std::int64_t n = pool.block_size() * pool.kv_stride() * eb;  // bytes per layer
    EXPECT_EQ(pool.block_bytes(), 2 * 2 * n);
    for (std::int64_t l = 0; l < 2; ++l) {
      auto* k = static_cast<unsigned char*>(pool.k_pool(l));
      auto* v = static_cast<unsigned char*>(pool.v_pool(l));
      for (std::int64_t i = 0; i < n; ++i) {
        k[a * n + i] = static_cast<unsigned char>(l * 31 + i);
        v[a * n + i] = static_cast<unsigned char>(255 - l * 17 - i);
      }
    }
    std::vector<char> buf(static_cast<std::size_t>(pool.block_bytes()));
    pool.export_block(a, buf.data());
    EXPECT_EQ(0, std::memcmp(buf.data(), static_cast<const char*>(pool.k_pool(0)) + a * n,
                             static_cast<std::size_t>(n)));
    pool.import_block(b, buf.data());
    for (std::int64_t l = 0; l < 2; ++l) {
      const auto* k = static_cast<const char*>(pool.k_pool(l));
      const auto* v = static_cast<const char*>(pool.v_pool(l));
      EXPECT_EQ(0, std::memcmp(k + a * n, k + b * n, static_cast<std::size_t>(n)));
      EXPECT_EQ(0, std::memcmp(v + a * n, v + b * n, static_cast<std::size_t>(n)));
    }
  }
}

// bf16/f16 storage halves block_bytes(), so the same budget holds twice the blocks.
TEST(KvCachePool, SixteenBitStorageDoublesCapacity) {
  const model::ModelConfig c = small_config();
  const std::int64_t budget = 10 * 2 * 2 * 16 * 8 * 4 + 100;  // 10 f32 blocks
  const model::KvCachePool f32(c, 16, budget);
  EXPECT_EQ(f32.kv_dtype(), core::DType::kF32);
  EXPECT_EQ(f32.capacity(), 10);
  for (core::DType dt : {core::DType::kBF16, core::DType::kF16}) {
    const model::KvCachePool half(c, 16, budget, nullptr, dt);
    EXPECT_EQ(half.kv_dtype(), dt);
    EXPECT_EQ(half.block_bytes() * 2, f32.block_bytes());
    EXPECT_EQ(half.capacity(), 20) << to_string(dt);
  }
  try {
    model::KvCachePool(c, 16, budget, nullptr, static_cast<core::DType>(7));
    ADD_FAILURE() << "kv_dtype 7 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.field(), "kv_dtype");
  }
}

}  // namespace
}  // namespace detinfer
