// The framing shared by the disk and Redis tiers: a fixed header (magic, format version,
// key, payload length, XXH3-64 checksum) in front of the payload. Everything read back is
// validated before it is served.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cache/block_store.h"
#include "detinfer/hash.h"

namespace detinfer::cache {

// 8 bytes naming what an entry holds.
using EntryMagic = std::array<char, 8>;
inline constexpr EntryMagic kKvBlockMagic = {'D', 'T', 'K', 'V', 'B', 'L', 'K', '\0'};
inline constexpr EntryMagic kResultMagic = {'D', 'T', 'R', 'E', 'S', 'L', 'T', '\0'};

inline constexpr std::uint32_t kEntryFormatVersion = 1;
// magic[8] | u32 version | u32 reserved (0) | u64 key.high | u64 key.low | u64 payload
// length | u64 checksum; integers little-endian. checksum = XXH3-64 of the first 40
// header bytes followed by the payload, so a flipped bit anywhere is caught.
inline constexpr std::size_t kEntryHeaderBytes = 48;

enum class EntryStatus : std::uint8_t {
  kOk = 0,
  kTruncated,  // shorter than header + declared length
  kTooLong,    // longer than header + declared length
  kBadMagic,
  kBadVersion,
  kWrongKey,     // a valid entry for another key
  kWrongLength,  // a valid entry whose payload is not the expected size
  kBadChecksum,
};
const char* to_string(EntryStatus s);

using EntryHeader = std::array<std::uint8_t, kEntryHeaderBytes>;

EntryHeader encode_entry_header(const EntryMagic& magic, const Hash128& key, const void* payload,
                                std::size_t size);

// Validates a header against the expected magic and key. On kOk *payload_size is the
// declared length; expected_size (0 = any) must match it.
EntryStatus parse_entry_header(const std::uint8_t* header, const EntryMagic& magic,
                               const Hash128& key, std::size_t expected_size,
                               std::uint64_t* payload_size);

// Checks the checksum of a parsed header against the payload.
EntryStatus verify_entry_payload(const std::uint8_t* header, const void* payload, std::size_t size);

// Header + payload as one buffer (the Redis value).
std::string encode_entry(const EntryMagic& magic, const Hash128& key, const Bytes& payload);

// Decodes a whole entry (header + payload); on kOk *out holds the payload.
EntryStatus decode_entry(const void* data, std::size_t size, const EntryMagic& magic,
                         const Hash128& key, std::size_t expected_size, Bytes* out);

}  // namespace detinfer::cache
