// Reproducible random choices for the CLI tools (background traffic, bench prompts):
// Philox keyed by (seed, stream, step), like everything random in detinfer.
#pragma once

#include <cstdint>
#include <vector>

#include "detinfer/philox.h"

namespace detinfer_cli {

class CliRandom {
 public:
  CliRandom(std::uint64_t seed, std::uint64_t stream) : seed_(seed), stream_(stream) {}
  std::uint32_t next_u32() { return detinfer::philox_bits(seed_, stream_, step_++, 0); }
  // Uniform integer in [lo, hi] (hi - lo < 2^32; the tiny modulo bias is irrelevant here).
  std::int64_t range(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(next_u32() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  std::vector<std::int32_t> tokens(std::int64_t n, std::int64_t vocab) {
    std::vector<std::int32_t> t(static_cast<std::size_t>(n));
    for (auto& x : t) x = static_cast<std::int32_t>(range(0, vocab - 1));
    return t;
  }

 private:
  std::uint64_t seed_;
  std::uint64_t stream_;
  std::uint64_t step_ = 0;
};

}  // namespace detinfer_cli
