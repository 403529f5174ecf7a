#include "devtools/safetensors_writer.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace detinfer::devtools {

void write_safetensors(
    const std::string& path, std::vector<TensorEntry> entries,
    const std::function<void(const TensorEntry&, std::vector<std::uint8_t>&)>& produce) {
  std::sort(entries.begin(), entries.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::uint64_t offset = 0;
  std::vector<std::uint64_t> sizes;
  for (const auto& e : entries) {
    std::uint64_t bytes = core::dtype_size(e.dtype);
    for (const std::int64_t d : e.shape) bytes *= static_cast<std::uint64_t>(d);
    header[e.name] = {{"dtype", core::safetensors_name(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    sizes.push_back(bytes);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(ErrorCode::kNotFound, "cannot create ", path);
  std::uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(text.size() >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<std::uint8_t> bytes;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    bytes.clear();
    produce(entries[i], bytes);
    if (bytes.size() != sizes[i]) {
      fail(ErrorCode::kInternal, "tensor ", entries[i].name, ": produced ", bytes.size(),
           " bytes, expected ", sizes[i]);
    }
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  out.close();
  if (!out) fail(ErrorCode::kUnavailable, "write to ", path, " failed");
}

std::uint16_t f32_to_bf16(float f) {
  std::uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

std::uint16_t f32_to_f16(float f) {
  std::uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (ax >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (ax < 0x38800000u) {  // below 2^-14: an f16 subnormal (or zero)
    const std::uint32_t exp = ax >> 23;
    if (exp == 0) return static_cast<std::uint16_t>(sign);
    const std::uint32_t mant = (ax & 0x7fffffu) | 0x800000u;  // value = mant * 2^(exp-150)
    const std::uint32_t shift = 126 - exp;                    // to units of 2^-24
    if (shift > 24) return static_cast<std::uint16_t>(sign);
    std::uint32_t q = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<std::uint16_t>(sign | q);
  }
  const std::uint32_t rebased = ax - (112u << 23);
  return static_cast<std::uint16_t>(sign | ((rebased + 0xfffu + ((ax >> 13) & 1u)) >> 13));
}

}  // namespace detinfer::devtools
