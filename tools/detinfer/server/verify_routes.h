// POST /v1/verify of `detinfer serve` (docs/fingerprint.md, "Transcripts and
// verification"): checks transcripts without regenerating them.
#pragma once

#include <nlohmann/json.hpp>

#include "detinfer/session.h"
#include "http/router.h"

namespace detinfer_cli {

// {verified, steps_checked, message, divergence: null | {sample, step, reason,
// expected_token, recorded_token, expected_digest, recorded_digest}}: what POST /v1/verify
// and `detinfer verify --json` print.
nlohmann::json verify_result_json(const detinfer::VerifyResult& r);

// Body: {"transcript": {...}} (one detinfer.transcript/1 object) or {"transcripts": [...]}
// (at most 64, verified together). 200 with {verified, steps_checked, message, divergence}
// (or {"results": [...]}), whether verified or not; 400 naming the field for a malformed
// transcript or one made with another model or numerics; 503 once the session is closed.
void add_verify_routes(detinfer_http::Router& router, detinfer::DeterministicSession& session);

}  // namespace detinfer_cli
