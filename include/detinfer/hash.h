// XXH3-64 and XXH3-128 (xxHash 0.8), one-shot and streaming, with a stable lowercase
// hex rendering. Model fingerprints, cache keys and logits digests are built on these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "detinfer/export.h"

namespace detinfer {

// A 128-bit digest. hex() is 32 lowercase digits, high half first (xxHash's canonical
// big-endian form, as printed by `xxhsum -H2`).
struct DETINFER_API Hash128 {
  std::uint64_t high = 0;
  std::uint64_t low = 0;

  std::string hex() const;
  // Parses 32 hex digits; throws Error(kInvalidArgument) on anything else.
  static Hash128 from_hex(std::string_view hex);

  friend bool operator==(const Hash128& a, const Hash128& b) {
    return a.high == b.high && a.low == b.low;
  }
  friend bool operator!=(const Hash128& a, const Hash128& b) { return !(a == b); }
  friend bool operator<(const Hash128& a, const Hash128& b) {
    return a.high != b.high ? a.high < b.high : a.low < b.low;
  }
};

// 16 lowercase hex digits.
DETINFER_API std::string hex64(std::uint64_t value);

DETINFER_API std::uint64_t xxh3_64(const void* data, std::size_t size, std::uint64_t seed = 0);
DETINFER_API Hash128 xxh3_128(const void* data, std::size_t size, std::uint64_t seed = 0);
inline std::uint64_t xxh3_64(std::string_view s) { return xxh3_64(s.data(), s.size()); }
inline Hash128 xxh3_128(std::string_view s) { return xxh3_128(s.data(), s.size()); }

// Streaming XXH3. Feeding the same bytes in any split gives the one-shot digest.
// Integers are fed little-endian so digests are the same on every machine.
class DETINFER_API Hasher {
 public:
  explicit Hasher(std::uint64_t seed = 0);
  ~Hasher();
  Hasher(const Hasher& other);
  Hasher& operator=(const Hasher& other);
  Hasher(Hasher&&) noexcept;
  Hasher& operator=(Hasher&&) noexcept;

  Hasher& update(const void* data, std::size_t size);
  Hasher& update(std::string_view s) { return update(s.data(), s.size()); }
  Hasher& update_u32(std::uint32_t v);
  Hasher& update_u64(std::uint64_t v);
  Hasher& update_i64(std::int64_t v) { return update_u64(static_cast<std::uint64_t>(v)); }
  // Length-prefixed string, so that ("ab","c") and ("a","bc") differ.
  Hasher& update_field(std::string_view s);
  Hasher& update_hash(const Hash128& h);

  void reset();
  std::uint64_t digest64() const;
  Hash128 digest128() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::uint64_t seed_;
};

}  // namespace detinfer
