// Standard base64 (RFC 4648, with padding) for the logits dumps of a fingerprint.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace detinfer::fingerprint {

std::string base64_encode(const std::uint8_t* data, std::size_t size);
// nullopt for anything that is not canonical padded base64.
std::optional<std::vector<std::uint8_t>> base64_decode(std::string_view text);

}  // namespace detinfer::fingerprint
