// Logits digests (docs/session.md): the per-step digest is XXH3-64 (seed 0) of the step's
// raw fp32 logits row as little-endian bits; the chain over a sequence's steps is
//   chain_0 = 0,  chain_{i+1} = XXH3-64(le64(chain_i) || le64(step_digest_i)).
#pragma once

#include <cstdint>
#include <vector>

#include "detinfer/hash.h"

namespace detinfer::decode {

inline std::uint64_t step_digest(const float* row, std::int64_t vocab) {
  static_assert(sizeof(float) == 4, "binary32 expected");
  return xxh3_64(row, static_cast<std::size_t>(vocab) * sizeof(float));
}

inline std::uint64_t chain_link(std::uint64_t prev, std::uint64_t step) {
  unsigned char buf[16];
  for (int i = 0; i < 8; ++i) {
    buf[i] = static_cast<unsigned char>(prev >> (8 * i));
    buf[8 + i] = static_cast<unsigned char>(step >> (8 * i));
  }
  return xxh3_64(buf, sizeof(buf));
}

inline std::uint64_t chain_of(const std::vector<std::uint64_t>& steps) {
  std::uint64_t c = 0;
  for (const std::uint64_t s : steps) c = chain_link(c, s);
  return c;
}

}  // namespace detinfer::decode
