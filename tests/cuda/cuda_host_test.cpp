// CPU-side tests of the CUDA module that need no GPU: the host build of the device math
// (exp/log, widening, Philox) equals the CPU reference bit for bit, and every launcher
// rejects bad arguments with a detinfer::Error before touching the device.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "detinfer/error.h"
#include "detinfer/philox.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_math.h"
#include "kernels/kernels.h"
#include "kernels/reference/reference.h"

namespace detinfer::kernels::cuda {
namespace {

std::uint32_t bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

float from(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// Every 251st bit pattern of binary32 (all exponents, signs and many mantissas) plus the
// special values: the host build of dm::exp_f32/log_f32 must give the reference's bits.
TEST(CudaDeviceMath, ExpLogMirrorEqualsReferenceBitForBit) {
  std::int64_t checked = 0;
  const auto check = [&](float x) {
    if (x != x) return;  // NaN payloads are not part of the contract on the GPU
    const float e = dm::exp_f32(x);
    const float re = ref::exp_f32(x);
    ASSERT_EQ(bits(e), bits(re)) << "exp(" << x << ") bits 0x" << std::hex << bits(x);
    const float l = dm::log_f32(x);
    const float rl = ref::log_f32(x);
    if (rl != rl) {
      ASSERT_TRUE(l != l) << "log(" << x << ")";
    } else {
      ASSERT_EQ(bits(l), bits(rl)) << "log(" << x << ") bits 0x" << std::hex << bits(x);
    }
    ++checked;
  };
  for (const float x :
       {0.0f, -0.0f, 1.0f, -1.0f, 88.72f, 89.0f, 89.0001f, -104.0f, -104.1f, -87.3f, 1e-45f,
        0x1p-126f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()})
    check(x);
  for (std::uint64_t u = 0; u <= 0xffffffffull; u += 251) {
    check(from(static_cast<std::uint32_t>(u)));
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(checked, 17000000);
}

TEST(CudaDeviceMath, WideningEqualsKernelsForAll65536Values) {
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto v = static_cast<std::uint16_t>(h);
    ASSERT_EQ(bits(dm::bf16_to_f32(v)), bits(bf16_to_f32(v))) << "bf16 0x" << std::hex << h;
    ASSERT_EQ(bits(dm::f16_to_f32(v)), bits(f16_to_f32(v))) << "f16 0x" << std::hex << h;
  }
}

TEST(CudaDeviceMath, F32ToBf16RoundsToNearestEven) {
  EXPECT_EQ(dm::f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(dm::f32_to_bf16(from(0x3f808000u)), 0x3f80);  // tie -> even (down)
  EXPECT_EQ(dm::f32_to_bf16(from(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(dm::f32_to_bf16(from(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_EQ(dm::f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(dm::f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(dm::f32_to_bf16(from(0x7f7fffffu)), 0x7f80);  // max float rounds to inf
  const std::uint16_t nan = dm::f32_to_bf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x7f, 0);
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {  // every finite bf16 round-trips
    const auto v = static_cast<std::uint16_t>(h);
    if ((h & 0x7f80u) == 0x7f80u) continue;
    ASSERT_EQ(dm::f32_to_bf16(bf16_to_f32(v)), v);
  }
}

TEST(CudaDeviceMath, PhiloxMirrorEqualsCoreGenerator) {
  for (std::uint64_t i = 0; i < 20000; ++i) {
    const std::uint64_t seed = i * 0x9E3779B97F4A7C15ull;
    const std::uint64_t stream = i % 7 + (i << 40);
    const std::uint64_t step = i * 31 + (i << 33);
    const PhiloxCounter want = philox_block(seed, stream, step);
    const dm::Philox4 got = dm::philox_block(seed, stream, step);
    for (int lane = 0; lane < 4; ++lane) {
      ASSERT_EQ(got.v[lane], want[lane]) << "i=" << i << " lane=" << lane;
      ASSERT_EQ(bits(dm::uniform01(got.v[lane])), bits(uniform01(want[lane])));
    }
  }
}

// --- launch-parameter validation (host checks, no device needed) --------------------------

template <typename F>
void expect_error(ErrorCode code, F f) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda::"), std::string::npos) << e.what();
  }
}

// Never dereferenced: validation fails first.
const float* const kFake = reinterpret_cast<const float*>(std::uintptr_t{4096});
float* const kFakeOut = reinterpret_cast<float*>(std::uintptr_t{8192});

TEST(CudaValidation, LinearRejectsBadShapesAndPointers) {
  expect_error(ErrorCode::kInvalidArgument, [] {
    linear(nullptr, 8, 1, kFake, core::DType::kF32, 4, 8, nullptr, kFakeOut, 4, nullptr);
  });
  expect_error(ErrorCode::kInvalidArgument, [] {
    linear(kFake, 8, 0, kFake, core::DType::kF32, 4, 8, nullptr, kFakeOut, 4, nullptr);
  });
  expect_error(ErrorCode::kInvalidArgument, [] {
    linear(kFake, 7, 1, kFake, core::DType::kBF16, 4, 8, nullptr, kFakeOut, 4, nullptr);
  });
  expect_error(ErrorCode::kInvalidArgument, [] {
    linear(kFake, 8, 1, kFake, core::DType::kF16, 4, 8, nullptr, kFakeOut, 3, nullptr);
  });
  expect_error(ErrorCode::kInvalidArgument, [] {
    linear(kFake, 8, 1, kFake, static_cast<core::DType>(9), 4, 8, nullptr, kFakeOut, 4, nullptr);
  });
}

TEST(CudaValidation, RowOpsRejectBadShapes) {
  expect_error(ErrorCode::kInvalidArgument,
               [] { rms_norm(kFake, 8, nullptr, 1e-6f, kFakeOut, 8, 1, 8, nullptr); });
  expect_error(ErrorCode::kInvalidArgument,
               [] { rms_norm(kFake, 4, kFake, 1e-6f, kFakeOut, 8, 1, 8, nullptr); });
  expect_error(ErrorCode::kInvalidArgument, [] { softmax(kFake, 8, kFakeOut, 8, 0, 8, nullptr); });
  expect_error(ErrorCode::kUnsupported, [] {
    softmax(kFake, kMaxRowLength + 64, kFakeOut, kMaxRowLength + 64, 1, kMaxRowLength + 64,
            nullptr);
  });
  expect_error(ErrorCode::kInvalidArgument,
               [] { log_softmax(kFake, 8, nullptr, 8, 1, 8, nullptr); });
  expect_error(ErrorCode::kInvalidArgument, [] { argmax(kFake, 8, 1, 0, nullptr, nullptr); });
  expect_error(ErrorCode::kInvalidArgument,
               [] { rms_norm_fast(kFake, 8, kFake, 1e-6f, kFakeOut, 8, -1, 8, nullptr); });
  expect_error(ErrorCode::kInvalidArgument, [] { silu_mul(nullptr, kFake, kFakeOut, 8, nullptr); });
  expect_error(ErrorCode::kInvalidArgument, [] { add(kFake, nullptr, kFakeOut, 8, nullptr); });
  const auto* table = reinterpret_cast<const std::int32_t*>(kFake);
  expect_error(ErrorCode::kInvalidArgument, [&] {
    kv_write(kFake, kFake, 64, 1, -1, table, 16, 64, kFakeOut, kFakeOut, core::DType::kF32,
             nullptr);
  });
  expect_error(ErrorCode::kInvalidArgument, [&] {
    kv_write(kFake, kFake, 32, 1, 0, table, 16, 64, kFakeOut, kFakeOut, core::DType::kF32, nullptr);
  });
}

TEST(CudaValidation, RopeEmbeddingAndPhiloxRejectBadArguments) {
  const auto* pos = reinterpret_cast<const std::int32_t*>(kFake);
  expect_error(ErrorCode::kInvalidArgument,
               [&] { rope(kFakeOut, 1, 64, 1, 64, 63, kFake, kFake, 32, pos, nullptr); });
  expect_error(ErrorCode::kInvalidArgument,
               [&] { rope(kFakeOut, 1, 100, 2, 64, 64, kFake, kFake, 32, pos, nullptr); });
  expect_error(ErrorCode::kInvalidArgument,
               [&] { rope(kFakeOut, 1, 128, 2, 64, 64, kFake, kFake, 16, pos, nullptr); });
  expect_error(ErrorCode::kInvalidArgument, [&] {
    embedding(pos, 1, kFake, core::DType::kF32, 0, 8, kFakeOut, 8, nullptr, nullptr);
  });
  expect_error(ErrorCode::kInvalidArgument, [&] {
    embedding(pos, 1, kFake, core::DType::kBF16, 10, 8, kFakeOut, 4, nullptr, nullptr);
  });
  expect_error(ErrorCode::kInvalidArgument, [] {
    philox_fill(1, 2, 3, 4, reinterpret_cast<std::uint32_t*>(kFakeOut), 8, nullptr);
  });
}

TEST(CudaValidation, QuantizedLinearRejectsBadShapesAndPointers) {
  const auto* q = reinterpret_cast<const std::int8_t*>(kFake);
  const auto* is = reinterpret_cast<const std::int32_t*>(kFake);
  const auto* ws = reinterpret_cast<const ref::BlockScales*>(kFake);
  auto* qo = reinterpret_cast<std::int8_t*>(kFakeOut);
  auto* iso = reinterpret_cast<std::int32_t*>(kFakeOut);
  expect_error(ErrorCode::kInvalidArgument,  // k not a multiple of 32
               [&] { quantize_acts(kFake, 48, 2, 48, qo, kFakeOut, iso, nullptr); });
  expect_error(ErrorCode::kInvalidArgument,
               [&] { quantize_acts(kFake, 16, 2, 32, qo, kFakeOut, iso, nullptr); });
  expect_error(ErrorCode::kInvalidArgument,
               [&] { quantize_acts(nullptr, 32, 2, 32, qo, kFakeOut, iso, nullptr); });
  expect_error(ErrorCode::kInvalidArgument, [&] {
    quant_linear(q, kFake, is, 2, q, ws, false, 8, 40, nullptr, kFakeOut, 8, nullptr);
  });
  expect_error(ErrorCode::kInvalidArgument, [&] {
    quant_linear(q, kFake, is, 2, q, ws, false, 8, 64, nullptr, kFakeOut, 7, nullptr);
  });
  expect_error(ErrorCode::kInvalidArgument, [&] {
    quant_linear(q, kFake, is, 2, q, nullptr, false, 8, 64, nullptr, kFakeOut, 8, nullptr);
  });
  const auto* ids = reinterpret_cast<const std::int32_t*>(kFake);
  expect_error(ErrorCode::kInvalidArgument,
               [&] { quant_embedding(ids, 2, q, ws, true, 0, 64, kFakeOut, 64, nullptr); });
  expect_error(ErrorCode::kInvalidArgument,
               [&] { quant_embedding(ids, 2, q, ws, true, 9, 64, kFakeOut, 32, nullptr); });
}

TEST(CudaValidation, AttentionRejectsBadViews) {
  const auto* keys = reinterpret_cast<const std::int64_t*>(kFake);
  PagedKvView kv;
  kv.k_pool = kFake;
  kv.v_pool = kFake;
  kv.block_table = reinterpret_cast<const std::int32_t*>(kFake);
  kv.num_blocks = 4;
  kv.block_size = 16;
  kv.num_kv_heads = 2;
  kv.head_dim = 64;
  PagedKvView bad = kv;
  bad.num_kv_heads = 3;  // 4 query heads are not a multiple of 3
  expect_error(ErrorCode::kInvalidArgument, [&] {
    cuda::attention(kFake, 256, 1, keys, 4, bad, 0.125f, kFakeOut, 256, nullptr);
  });
  bad = kv;
  bad.head_dim = 512;
  expect_error(ErrorCode::kUnsupported, [&] {
    cuda::attention(kFake, 2048, 1, keys, 4, bad, 0.125f, kFakeOut, 2048, nullptr);
  });
  bad = kv;
  bad.v_pool = nullptr;
  expect_error(ErrorCode::kInvalidArgument, [&] {
    cuda::attention(kFake, 256, 1, keys, 4, bad, 0.125f, kFakeOut, 256, nullptr);
  });
  expect_error(ErrorCode::kInvalidArgument, [&] {
    cuda::attention(kFake, 128, 1, keys, 4, kv, 0.125f, kFakeOut, 256, nullptr);
  });
  const std::size_t ws = attention_split_workspace_bytes(2, 4, 64, 1000);
  EXPECT_EQ(ws, std::size_t{2} * 4 * 4 * 66 * sizeof(float));  // 4 splits of 256 keys
  void* fake_ws = kFakeOut;
  expect_error(ErrorCode::kInvalidArgument, [&] {
    attention_split(kFake, 256, 2, keys, 1000, 4, kv, 0.125f, kFakeOut, 256, fake_ws, ws - 4,
                    nullptr);
  });
  // The masked split kernel's window and cap are checked before any launch.
  expect_error(ErrorCode::kInvalidArgument, [&] {
    attention_split_masked(kFake, 256, 2, keys, 1000, 4, kv, 0.125f, -1, 0.0f, kFakeOut, 256,
                           fake_ws, ws, nullptr);
  });
  expect_error(ErrorCode::kInvalidArgument, [&] {
    attention_split_masked(kFake, 256, 2, keys, 1000, 4, kv, 0.125f, 8, -2.0f, kFakeOut, 256,
                           fake_ws, ws, nullptr);
  });
}

TEST(CudaValidation, TensorCoreLinearNeedsAlignedMultiplesOf8) {
  const auto* x = reinterpret_cast<const std::uint16_t*>(kFake);
  const auto* unaligned = reinterpret_cast<const std::uint16_t*>(std::uintptr_t{4098});
  expect_error(ErrorCode::kUnsupported,
               [&] { linear_bf16_tc(x, 12, 1, x, 4, 12, nullptr, kFakeOut, 4, nullptr); });
  expect_error(ErrorCode::kUnsupported,
               [&] { linear_bf16_tc(unaligned, 16, 1, x, 4, 16, nullptr, kFakeOut, 4, nullptr); });
  expect_error(ErrorCode::kInvalidArgument,
               [&] { linear_bf16_tc(x, 8, 1, x, 4, 16, nullptr, kFakeOut, 4, nullptr); });
  expect_error(ErrorCode::kInvalidArgument, [&] {
    sample_draw(kFake, reinterpret_cast<const std::int32_t*>(kFake), 5, 1, 0, 0,
                reinterpret_cast<std::int64_t*>(kFakeOut), kFakeOut, 8, nullptr);
  });
}

// Without a device the runtime calls fail with an Error (never an abort); with one they
// work. Either way device_count() does not throw.
TEST(CudaRuntime, NoDeviceIsAnErrorNotACrash) {
  if (device_count() > 0) {
    DeviceBuffer b(64);
    EXPECT_EQ(b.bytes(), 64u);
    EXPECT_EQ(no_device_reason(), "");
    return;
  }
  EXPECT_FALSE(no_device_reason().empty());
  try {
    DeviceBuffer b(64);
    ADD_FAILURE() << "cudaMalloc succeeded without a device";
  } catch (const Error& e) {
    EXPECT_TRUE(e.code() == ErrorCode::kUnavailable || e.code() == ErrorCode::kInternal)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("cudaMalloc"), std::string::npos) << e.what();
  }
  DeviceBuffer empty(0);  // no allocation, no CUDA call
  EXPECT_EQ(empty.data(), nullptr);
}

}  // namespace
}  // namespace detinfer::kernels::cuda
