// The one weight element type (core/dtype.h): names, safetensors names, sizes, and that
// parsing inverts the names.
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace detinfer {
namespace {

TEST(DTypeNames, RoundTripAndSizes) {
  EXPECT_STREQ(to_string(core::DType::kF32), "f32");
  EXPECT_STREQ(to_string(core::DType::kBF16), "bf16");
  EXPECT_STREQ(to_string(core::DType::kF16), "f16");
  EXPECT_STREQ(core::safetensors_name(core::DType::kF32), "F32");
  EXPECT_STREQ(core::safetensors_name(core::DType::kBF16), "BF16");
  EXPECT_STREQ(core::safetensors_name(core::DType::kF16), "F16");
  EXPECT_EQ(core::dtype_size(core::DType::kF32), 4u);
  EXPECT_EQ(core::dtype_size(core::DType::kBF16), 2u);
  EXPECT_EQ(core::dtype_size(core::DType::kF16), 2u);
  std::set<std::string> names;
  for (core::DType d : {core::DType::kF32, core::DType::kBF16, core::DType::kF16}) {
    EXPECT_EQ(core::parse_dtype(to_string(d)), d);
    EXPECT_EQ(core::parse_safetensors_dtype(core::safetensors_name(d)), d);
    names.insert(to_string(d));
  }
  EXPECT_EQ(names.size(), 3u);
}

TEST(DTypeNames, OtherNamesAreRejected) {
  EXPECT_EQ(core::parse_dtype("F32"), std::nullopt);  // the safetensors spelling is not to_string's
  EXPECT_EQ(core::parse_dtype("f64"), std::nullopt);
  EXPECT_EQ(core::parse_dtype(""), std::nullopt);
  EXPECT_EQ(core::parse_safetensors_dtype("bf16"), std::nullopt);
  EXPECT_EQ(core::parse_safetensors_dtype("F64"), std::nullopt);
  EXPECT_STREQ(to_string(static_cast<core::DType>(9)), "unknown");
}

}  // namespace
}  // namespace detinfer
