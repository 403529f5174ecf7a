#include "verify_routes.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/json_parse.h"
#include "detinfer/hash.h"
#include "serve_app.h"
#include "serve_stream.h"

namespace detinfer_cli {

using nlohmann::json;

namespace {
constexpr std::size_t kMaxTranscripts = 64;
constexpr std::size_t kMaxBodyBytes = std::size_t{64} << 20;
constexpr std::int32_t kMaxBodyDepth = 20;  // a transcript nests 4 levels

detinfer::Error bad(const std::string& message, const std::string& field) {
  return detinfer::Error(detinfer::ErrorCode::kInvalidArgument, message, field);
}

// The transcripts of a body, parsed strictly; `many` tells which form it used.
std::vector<detinfer::Transcript> read_body(const std::string& text, bool& many) {
  detinfer::core::JsonLimits limits;
  limits.max_bytes = kMaxBodyBytes;
  limits.max_depth = kMaxBodyDepth;
  const json body =
      detinfer::core::parse_json(text, limits, detinfer::ErrorCode::kInvalidArgument, "body");
  if (!body.is_object()) throw bad("the body must be a JSON object", "body");
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it.key() != "transcript" && it.key() != "transcripts") {
      throw bad("unknown field '" + it.key() + "' (expected transcript or transcripts)", it.key());
    }
  }
  many = body.contains("transcripts");
  if (many == body.contains("transcript")) {
    throw bad("give exactly one of transcript (an object) or transcripts (an array)", "transcript");
  }
  std::vector<detinfer::Transcript> out;
  if (!many) {
    out.push_back(detinfer::Transcript::from_json(body["transcript"].dump()));
    return out;
  }
  const json& all = body["transcripts"];
  if (!all.is_array() || all.empty() || all.size() > kMaxTranscripts) {
    throw bad("transcripts must be an array of 1 to " + std::to_string(kMaxTranscripts) +
                  " transcript objects",
              "transcripts");
  }
  for (const json& t : all) out.push_back(detinfer::Transcript::from_json(t.dump()));
  return out;
}
}  // namespace

json verify_result_json(const detinfer::VerifyResult& r) {
  json j = {{"verified", r.verified},
            {"steps_checked", r.steps_checked},
            {"message", r.message},
            {"divergence", nullptr}};
  if (r.divergence) {
    const detinfer::VerifyDivergence& d = *r.divergence;
    j["divergence"] = {{"sample", d.sample},
                       {"step", d.step},
                       {"reason", d.reason},
                       {"expected_token", d.expected_token},
                       {"recorded_token", d.recorded_token},
                       {"expected_digest", detinfer::hex64(d.expected_digest)},
                       {"recorded_digest", detinfer::hex64(d.recorded_digest)}};
  }
  return j;
}

void add_verify_routes(detinfer_http::Router& router, detinfer::DeterministicSession& session) {
  router.add("POST", "/v1/verify",
             [&session](const detinfer_http::Request& q, detinfer_http::ResponseWriter& w) {
               try {
                 bool many = false;
                 const std::vector<detinfer::Transcript> ts = read_body(q.body, many);
                 const std::vector<detinfer::VerifyResult> rs = session.verify(ts);
                 json out;
                 if (many) {
                   out = {{"results", json::array()}};
                   for (const auto& r : rs) out["results"].push_back(verify_result_json(r));
                 } else {
                   out = verify_result_json(rs.front());
                 }
                 detinfer_http::Response resp;
                 resp.body = dump_json(out);
                 w.respond(std::move(resp));
               } catch (const detinfer::Error& e) {
                 w.respond(ServeApp::error_response(from_error(e)));
               }
             });
}

}  // namespace detinfer_cli
