// A streamed request of `detinfer serve` (completions and chat): the engine thread
// queues each token event and the HTTP worker drains the queue into server-sent events,
// so a slow client never stalls the engine. A client that goes away cancels the request.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "detinfer/session.h"
#include "http/http_message.h"

namespace detinfer_cli {

// JSON text for a response body (invalid UTF-8 from a tokenizer is replaced, not thrown).
std::string dump_json(const nlohmann::json& j);

struct StreamEvent {
  std::int32_t index = 0;  // the sample (or returned beam)
  std::string text;
  std::optional<detinfer::StepLogprobs> logprobs;
};

class EventStream {
 public:
  // Submits the request; a validation Error propagates before anything is sent.
  EventStream(detinfer::DeterministicSession& session, const detinfer::Prompt& prompt,
              const detinfer::GenerationConfig& config);
  const detinfer::RequestHandle* handle() const { return handle_.get(); }

  // Starts the 200 text/event-stream response on `w` (which must outlive this stream).
  void start(detinfer_http::ResponseWriter& w);
  // Writes one "data: <json>" event; once the client cannot be written, cancels instead.
  void send(const nlohmann::json& j);
  // Hands every event to on_event, in order, until the request has finished and every
  // event it queued has been handed over.
  void drain(const std::function<void(StreamEvent&)>& on_event);
  // The request's result (throws its Error).
  detinfer::GenerationResult result() { return handle_->get(); }
  // Writes "data: [DONE]" and ends the response.
  void finish();

 private:
  struct Queue;
  std::shared_ptr<Queue> queue_;
  std::shared_ptr<detinfer::RequestHandle> handle_;
  detinfer_http::ResponseWriter* writer_ = nullptr;
  bool client_ok_ = false;
};

}  // namespace detinfer_cli
