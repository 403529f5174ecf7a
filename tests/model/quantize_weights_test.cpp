// Quantization on load (model/quantize_weights.h) split over a thread pool: the same
// blocks for any thread count, and the same error (the first refused chunk of rows, in
// row order) whichever thread meets it first.
#include "model/quantize_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "detinfer/error.h"
#include "detinfer/philox.h"

namespace detinfer::model {
namespace {

std::vector<float> random_rows(std::int64_t n, std::int64_t k) {
  std::vector<float> w(static_cast<std::size_t>(n * k));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 2.0f * philox_uniform(11, 0, i, 0) - 1.0f;
  return w;
}

TEST(QuantizeWeights, APoolGivesTheSerialBlocks) {
  const std::int64_t n = 1000, k = 256;  // 4 chunks of 256 rows, the last one short
  const std::vector<float> w = random_rows(n, k);
  for (const kernels::QuantFormat f :
       {kernels::QuantFormat::kQ8_0, kernels::QuantFormat::kQ4_K, kernels::QuantFormat::kQ6_K}) {
    const std::vector<std::uint8_t> serial =
        quantize_weights("w", w.data(), core::DType::kF32, n, k, f);
    for (const int threads : {2, 3}) {
      core::ThreadPool pool(threads);
      EXPECT_EQ(quantize_weights("w", w.data(), core::DType::kF32, n, k, f, &pool), serial)
          << kernels::to_string(f) << ", " << threads << " threads";
    }
  }
}

TEST(QuantizeWeights, TheErrorNamesTheFirstRefusedChunkForAnyThreadCount) {
  const std::int64_t n = 1000, k = 64;
  std::vector<float> w = random_rows(n, k);
  w[static_cast<std::size_t>(900 * k + 3)] = std::numeric_limits<float>::quiet_NaN();
  w[static_cast<std::size_t>(300 * k + 5)] = std::numeric_limits<float>::infinity();
  std::string serial;
  try {
    quantize_weights("blk.w", w.data(), core::DType::kF32, n, k, kernels::QuantFormat::kQ8_0);
    FAIL() << "a non-finite weight was quantized";
  } catch (const Error& e) {
    serial = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_NE(serial.find("rows from 256"), std::string::npos) << serial;
  for (const int threads : {2, 3}) {
    core::ThreadPool pool(threads);
    try {
      quantize_weights("blk.w", w.data(), core::DType::kF32, n, k, kernels::QuantFormat::kQ8_0,
                       &pool);
      FAIL() << "a non-finite weight was quantized";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), serial) << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace detinfer::model
