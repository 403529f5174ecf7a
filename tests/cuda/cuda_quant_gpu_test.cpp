// GPU test (label gpu) of the canonical quantized linear (src/kernels/cuda/quant.cu): on a
// real device, quantize_acts + quant_linear equal ref::quant_linear bit for bit for every
// weight format of quantized spec v1, and quant_embedding's rows equal
// ref::dequantize_block. Skipped without a device.
#include <gtest/gtest.h>

#include <vector>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/quant.h"
#include "kernels/quant_test_util.h"
#include "kernels/reference/quant_blocks.h"
#include "kernels/reference/quant_reference.h"

namespace detinfer::kernels::cuda {
namespace {

using test::first_bit_difference;
using test::to_device;
using test::to_host;

class CudaQuantGpu : public ::testing::Test {
 protected:
  void SetUp() override { DETINFER_REQUIRE_CUDA_DEVICE(); }
};

TEST_F(CudaQuantGpu, QuantLinearEqualsReferenceForEveryFormat) {
  for (const QuantFormat f : kAllQuantFormats) {
    const bool kf = testing::k_format(f);
    const std::int64_t n = kf ? 77 : 131, k = kf ? 768 : 288, nb = k / 32;
    const std::vector<std::uint8_t> w = testing::random_q(f, n, k, 60 + static_cast<int>(f));
    std::vector<std::int8_t> wq(n * k);
    std::vector<ref::BlockScales> ws(n * nb);
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t b = 0; b < nb; ++b)
        ws[j * nb + b] =
            ref::decode_block(f, w.data() + j * quant_row_bytes(f, k), b, &wq[j * k + b * 32]);
    const DeviceBuffer dwq = to_device(wq), dws = to_device(ws);
    const std::vector<float> bias = testing::random_floats(n, 70);
    const DeviceBuffer db = to_device(bias);
    for (const std::int64_t m : {1, 3, 16, 33}) {
      const std::int64_t ldx = k + 1, ldy = n + 3;
      const std::vector<float> x = testing::random_floats(m * ldx, 80 + m, 3.0f);
      std::vector<float> want(m * ldy, 0.0f);
      ref::quant_linear(x.data(), ldx, m, w.data(), f, n, k, bias.data(), want.data(), ldy);
      const DeviceBuffer dx = to_device(x);
      DeviceBuffer xq(m * k), xd(m * nb * 4), xs(m * nb * 8);
      DeviceBuffer dy = to_device(std::vector<float>(want.size(), 0.0f));
      quantize_acts(dx.as<float>(), ldx, m, k, xq.as<std::int8_t>(), xd.as<float>(),
                    xs.as<std::int32_t>(), nullptr);
      quant_linear(xq.as<std::int8_t>(), xd.as<float>(), xs.as<std::int32_t>(), m,
                   dwq.as<std::int8_t>(), dws.as<ref::BlockScales>(), quant_format_info(f).has_min,
                   n, k, db.as<float>(), dy.as<float>(), ldy, nullptr);
      EXPECT_EQ(first_bit_difference(to_host<float>(dy, want.size()), want), -1)
          << to_string(f) << " m=" << m;
    }
    const std::vector<std::int32_t> ids = {5, 0, static_cast<std::int32_t>(n - 1)};
    const DeviceBuffer dids = to_device(ids);
    DeviceBuffer de(ids.size() * k * 4);
    quant_embedding(dids.as<std::int32_t>(), 3, dwq.as<std::int8_t>(), dws.as<ref::BlockScales>(),
                    quant_format_info(f).has_min, n, k, de.as<float>(), k, nullptr);
    std::vector<float> want(ids.size() * k);
    for (std::size_t r = 0; r < ids.size(); ++r)
      for (std::int64_t b = 0; b < nb; ++b)
        ref::dequantize_block(f, w.data() + ids[r] * quant_row_bytes(f, k), b,
                              &want[r * k + b * 32]);
    EXPECT_EQ(first_bit_difference(to_host<float>(de, want.size()), want), -1) << to_string(f);
  }
}

}  // namespace
}  // namespace detinfer::kernels::cuda
