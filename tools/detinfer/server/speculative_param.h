// The per-request `speculative` object (docs/server.md, docs/speculative.md):
//   {"mode": "off" | "ngram" | "draft", "draft_tokens": 1..8, "ngram_min": 1..8,
//    "ngram_max": 1..8}
// the same settings as the flat parameters draft_tokens, draft_with_model, draft_ngram_min
// and draft_ngram_max (mode "ngram" and "draft" draft 4 tokens unless draft_tokens says
// otherwise; "draft" uses the server's --draft-model). It may not be combined with those
// flat parameters. Speculation changes only the speed, never a bit of the response.
#pragma once

#include <nlohmann/json.hpp>

#include "detinfer/generation.h"
#include "serve_request.h"

namespace detinfer_cli {

// Applies body["speculative"] (when present and not null) to `c` and records the fields
// it sets as the client's. Rejects (400, param "speculative") a malformed object, an
// unknown key or mode, a value out of range, and a request that also sets a flat field.
void read_speculative(const nlohmann::json& body, detinfer::GenerationConfig& c,
                      FieldSources& sources);

}  // namespace detinfer_cli
