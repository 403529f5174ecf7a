// The normalized GenerationConfig inside a fingerprint's request group.
#pragma once

#include <string>

#include "detinfer/generation.h"
#include "fingerprint/json_reader.h"

namespace detinfer::fingerprint {

// Every field except `seed` (recorded beside it as the seed actually used). Keys are
// sorted (nlohmann objects are ordered maps), so dump() is canonical.
json config_to_json(const GenerationConfig& c);
// Strict inverse; `path` names the object in errors.
GenerationConfig config_from_json(const json& j, const std::string& path);

}  // namespace detinfer::fingerprint
