// The normalized GenerationConfig inside a fingerprint's request group.
#pragma once

#include <string>

#include "core/json_fields.h"
#include "detinfer/generation.h"

namespace detinfer::fingerprint {

using core::json;

// Every field except `seed` (recorded beside it as the seed actually used). Keys are
// sorted (nlohmann objects are ordered maps), so dump() is canonical.
json config_to_json(const GenerationConfig& c);
// How a fingerprint is read: kCorrupt (a file), no unknown fields.
inline constexpr core::JsonReadPolicy kFingerprintPolicy{ErrorCode::kCorrupt, true, false,
                                                         "detinfer.fingerprint/1"};

// Strict inverse; `path` names the object in errors, `policy` the document's rules.
GenerationConfig config_from_json(const json& j, const std::string& path,
                                  const core::JsonReadPolicy& policy = kFingerprintPolicy);

}  // namespace detinfer::fingerprint
