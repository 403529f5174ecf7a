#include "cache/entry_codec.h"

#include <cstring>

namespace detinfer::cache {

namespace {
void put_u32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put_u64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t get_u32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}
std::uint64_t get_u64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

constexpr std::size_t kChecksumOffset = 40;

std::uint64_t checksum(const std::uint8_t* header, const void* payload, std::size_t size) {
  Hasher h;
  h.update(header, kChecksumOffset).update(payload, size);
  return h.digest64();
}
}  // namespace

const char* to_string(EntryStatus s) {
  switch (s) {
    case EntryStatus::kOk:
      return "ok";
    case EntryStatus::kTruncated:
      return "truncated";
    case EntryStatus::kTooLong:
      return "trailing bytes";
    case EntryStatus::kBadMagic:
      return "bad magic";
    case EntryStatus::kBadVersion:
      return "unsupported format version";
    case EntryStatus::kWrongKey:
      return "key mismatch";
    case EntryStatus::kWrongLength:
      return "unexpected payload length";
    case EntryStatus::kBadChecksum:
      return "checksum mismatch";
  }
  return "unknown";
}

EntryHeader encode_entry_header(const EntryMagic& magic, const Hash128& key, const void* payload,
                                std::size_t size) {
  EntryHeader h{};
  std::memcpy(h.data(), magic.data(), magic.size());
  put_u32(h.data() + 8, kEntryFormatVersion);
  put_u32(h.data() + 12, 0);
  put_u64(h.data() + 16, key.high);
  put_u64(h.data() + 24, key.low);
  put_u64(h.data() + 32, static_cast<std::uint64_t>(size));
  put_u64(h.data() + kChecksumOffset, checksum(h.data(), payload, size));
  return h;
}

EntryStatus parse_entry_header(const std::uint8_t* header, const EntryMagic& magic,
                               const Hash128& key, std::size_t expected_size,
                               std::uint64_t* payload_size) {
  if (std::memcmp(header, magic.data(), magic.size()) != 0) return EntryStatus::kBadMagic;
  if (get_u32(header + 8) != kEntryFormatVersion || get_u32(header + 12) != 0) {
    return EntryStatus::kBadVersion;
  }
  const Hash128 stored{get_u64(header + 16), get_u64(header + 24)};
  if (stored != key) return EntryStatus::kWrongKey;
  *payload_size = get_u64(header + 32);
  if (expected_size != 0 && *payload_size != expected_size) return EntryStatus::kWrongLength;
  return EntryStatus::kOk;
}

EntryStatus verify_entry_payload(const std::uint8_t* header, const void* payload,
                                 std::size_t size) {
  return checksum(header, payload, size) == get_u64(header + kChecksumOffset)
             ? EntryStatus::kOk
             : EntryStatus::kBadChecksum;
}

std::string encode_entry(const EntryMagic& magic, const Hash128& key, const Bytes& payload) {
  const EntryHeader h = encode_entry_header(magic, key, payload.data(), payload.size());
  std::string out;
  out.reserve(h.size() + payload.size());
  out.append(reinterpret_cast<const char*>(h.data()), h.size());
  out.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  return out;
}

EntryStatus decode_entry(const void* data, std::size_t size, const EntryMagic& magic,
                         const Hash128& key, std::size_t expected_size, Bytes* out) {
  if (size < kEntryHeaderBytes) return EntryStatus::kTruncated;
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::uint64_t len = 0;
  const EntryStatus s = parse_entry_header(p, magic, key, expected_size, &len);
  if (s != EntryStatus::kOk) return s;
  const std::size_t avail = size - kEntryHeaderBytes;
  if (avail < len) return EntryStatus::kTruncated;
  if (avail > len) return EntryStatus::kTooLong;
  if (verify_entry_payload(p, p + kEntryHeaderBytes, len) != EntryStatus::kOk) {
    return EntryStatus::kBadChecksum;
  }
  out->assign(p + kEntryHeaderBytes, p + kEntryHeaderBytes + len);
  return EntryStatus::kOk;
}

}  // namespace detinfer::cache
