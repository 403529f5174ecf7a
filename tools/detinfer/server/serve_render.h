// The dialect-specific end of the one request pipeline of `detinfer serve`
// (serve_app.h): how a finished or streaming request is written in its wire format.
// Everything before (parse, admission, submit, cancellation, seed log, error mapping) is
// the pipeline's and the same for every dialect. One renderer per request.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "detinfer/session.h"
#include "openai_protocol.h"
#include "serve_request.h"
#include "serve_stream.h"

namespace detinfer_cli {

// What a renderer reads: the request, the answer's id and times, the session (tokenizer,
// fingerprints), and whether whole answers carry the full run fingerprint.
struct RenderInput {
  const ServeRequest& req;
  ResponseContext ctx;
  const detinfer::DeterministicSession& session;
  bool full_fingerprint = false;
};

class ResponseRenderer {
 public:
  explicit ResponseRenderer(const RenderInput& in) : in_(in) {}
  virtual ~ResponseRenderer() = default;
  // The body of a whole (not streamed) answer.
  virtual nlohmann::json whole(const detinfer::GenerationResult& result) = 0;
  // Streamed: the chunks sent before the first token, for `n` choices.
  virtual std::vector<nlohmann::json> opening(std::int32_t n) = 0;
  // Streamed: the chunk for one token event of a valid choice, or nullopt while its text
  // is held back (its logprobs then ride with the next chunk that carries text).
  virtual std::optional<nlohmann::json> event(StreamEvent& ev) = 0;
  // Streamed: the last chunks (each choice's finish reason, seed and digest; the usage
  // chunk when asked).
  virtual std::vector<nlohmann::json> closing(const detinfer::GenerationResult& result) = 0;

 protected:
  const RenderInput in_;
};

// Each dialect's renderer (completions: serve_routes.cpp, chat: chat_routes.cpp).
std::unique_ptr<ResponseRenderer> completion_renderer(const RenderInput& in);
std::unique_ptr<ResponseRenderer> chat_renderer(const RenderInput& in);

// The renderer of `req`'s dialect (completions: openai_protocol.h, chat: chat_protocol.h),
// answering with `ctx`'s id; `full_fingerprint` adds the run fingerprint to whole answers.
std::unique_ptr<ResponseRenderer> make_renderer(const ServeRequest& req, const ResponseContext& ctx,
                                                const detinfer::DeterministicSession& session,
                                                bool full_fingerprint);

}  // namespace detinfer_cli
