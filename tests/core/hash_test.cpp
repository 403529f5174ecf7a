#include "detinfer/hash.h"

#include <gtest/gtest.h>

#include <string>

#include "detinfer/error.h"

namespace detinfer {
namespace {

// Reference values from xxhsum 0.8.1 (`xxhsum -H3` / `xxhsum -H2`) on the same bytes.
TEST(Hash, Xxh3KnownValues) {
  EXPECT_EQ(hex64(xxh3_64("")), "2d06800538d394c2");
  EXPECT_EQ(hex64(xxh3_64("detinfer")), "b923aee37888a9ed");
  EXPECT_EQ(xxh3_128("").hex(), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(xxh3_128("detinfer").hex(), "67c4692d03c676a3ef1aca43926bea10");
  std::string abc;
  for (int i = 0; i < 100; ++i) abc += "abc";
  EXPECT_EQ(hex64(xxh3_64(abc)), "3d1e91bb47ef5c2f");
  EXPECT_EQ(xxh3_128(abc).hex(), "bfae835ca03aaf033d1e91bb47ef5c2f");
}

TEST(Hash, StreamingEqualsOneShotForAnySplit) {
  std::string data;
  std::uint32_t x = 12345;
  for (int i = 0; i < 5000; ++i) {
    x = x * 1664525u + 1013904223u;
    data.push_back(static_cast<char>(x >> 24));
  }
  for (std::uint64_t seed : {0ull, 7ull}) {
    const Hash128 expect128 = xxh3_128(data.data(), data.size(), seed);
    const std::uint64_t expect64 = xxh3_64(data.data(), data.size(), seed);
    for (std::size_t split : {0u, 1u, 63u, 64u, 240u, 1000u, 4999u}) {
      Hasher h(seed);
      h.update(data.data(), split).update(data.data() + split, data.size() - split);
      EXPECT_EQ(h.digest128(), expect128) << "split " << split;
      EXPECT_EQ(h.digest64(), expect64) << "split " << split;
    }
  }
}

TEST(Hash, IntegersAreLittleEndianAndFieldsAreLengthPrefixed) {
  Hasher a;
  a.update_u32(0x04030201u);
  EXPECT_EQ(a.digest128(), xxh3_128(std::string("\x01\x02\x03\x04", 4)));
  Hasher b, c;
  b.update_field("ab").update_field("c");
  c.update_field("a").update_field("bc");
  EXPECT_NE(b.digest128(), c.digest128());
}

TEST(Hash, CopyAndReset) {
  Hasher a;
  a.update("prefix");
  Hasher b = a;
  a.update("x");
  b.update("x");
  EXPECT_EQ(a.digest128(), b.digest128());
  a.reset();
  EXPECT_EQ(a.digest128(), xxh3_128(""));
}

TEST(Hash, HexRoundTripAndErrors) {
  const Hash128 h = xxh3_128("round trip");
  EXPECT_EQ(Hash128::from_hex(h.hex()), h);
  EXPECT_EQ(Hash128::from_hex("99AA06D3014798D86001C324468D497F"), xxh3_128(""));
  EXPECT_THROW(Hash128::from_hex("abc"), Error);
  EXPECT_THROW(Hash128::from_hex("zzaa06d3014798d86001c324468d497f"), Error);
}

}  // namespace
}  // namespace detinfer
