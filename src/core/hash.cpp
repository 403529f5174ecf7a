#include "detinfer/hash.h"

#include <xxhash.h>

#include <cstring>

#include "core/check.h"

namespace detinfer {

namespace {
const char kHexDigits[] = "0123456789abcdef";

void append_hex(std::string& out, std::uint64_t v) {
  for (int shift = 60; shift >= 0; shift -= 4) out.push_back(kHexDigits[(v >> shift) & 0xF]);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string Hash128::hex() const {
  std::string out;
  out.reserve(32);
  append_hex(out, high);
  append_hex(out, low);
  return out;
}

Hash128 Hash128::from_hex(std::string_view hex) {
  if (hex.size() != 32) {
    fail(ErrorCode::kInvalidArgument, "Hash128 hex must have 32 digits, got ", hex.size(), ": '",
         hex, "'");
  }
  Hash128 h;
  for (std::size_t i = 0; i < 32; ++i) {
    const int v = hex_value(hex[i]);
    if (v < 0) fail(ErrorCode::kInvalidArgument, "invalid hex digit in Hash128: '", hex, "'");
    std::uint64_t& half = i < 16 ? h.high : h.low;
    half = (half << 4) | static_cast<std::uint64_t>(v);
  }
  return h;
}

std::string hex64(std::uint64_t value) {
  std::string out;
  out.reserve(16);
  append_hex(out, value);
  return out;
}

std::uint64_t xxh3_64(const void* data, std::size_t size, std::uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

Hash128 xxh3_128(const void* data, std::size_t size, std::uint64_t seed) {
  const XXH128_hash_t h = XXH3_128bits_withSeed(data, size, seed);
  return Hash128{h.high64, h.low64};
}

struct Hasher::State {
  XXH3_state_t* s = nullptr;
  State() : s(XXH3_createState()) {
    if (s == nullptr) fail(ErrorCode::kResourceExhausted, "XXH3_createState failed");
  }
  ~State() { XXH3_freeState(s); }
  State(const State&) = delete;
  State& operator=(const State&) = delete;
};

Hasher::Hasher(std::uint64_t seed) : state_(std::make_unique<State>()), seed_(seed) { reset(); }
Hasher::~Hasher() = default;
Hasher::Hasher(Hasher&&) noexcept = default;
Hasher& Hasher::operator=(Hasher&&) noexcept = default;

Hasher::Hasher(const Hasher& other) : state_(std::make_unique<State>()), seed_(other.seed_) {
  XXH3_copyState(state_->s, other.state_->s);
}

Hasher& Hasher::operator=(const Hasher& other) {
  if (this != &other) {
    if (!state_) state_ = std::make_unique<State>();
    XXH3_copyState(state_->s, other.state_->s);
    seed_ = other.seed_;
  }
  return *this;
}

void Hasher::reset() {
  // The 64- and 128-bit streaming variants share one state layout in xxHash 0.8.
  XXH3_128bits_reset_withSeed(state_->s, seed_);
}

Hasher& Hasher::update(const void* data, std::size_t size) {
  if (size != 0) XXH3_128bits_update(state_->s, data, size);
  return *this;
}

Hasher& Hasher::update_u32(std::uint32_t v) {
  unsigned char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  return update(b, 4);
}

Hasher& Hasher::update_u64(std::uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  return update(b, 8);
}

Hasher& Hasher::update_field(std::string_view s) {
  update_u64(s.size());
  return update(s);
}

Hasher& Hasher::update_hash(const Hash128& h) {
  update_u64(h.high);
  return update_u64(h.low);
}

std::uint64_t Hasher::digest64() const { return XXH3_64bits_digest(state_->s); }

Hash128 Hasher::digest128() const {
  const XXH128_hash_t h = XXH3_128bits_digest(state_->s);
  return Hash128{h.high64, h.low64};
}

}  // namespace detinfer
