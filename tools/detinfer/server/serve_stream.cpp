#include "serve_stream.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>

namespace detinfer_cli {

using nlohmann::json;

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

struct EventStream::Queue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<StreamEvent> events;
  bool client_gone = false;
};

EventStream::EventStream(detinfer::DeterministicSession& session, const detinfer::Prompt& prompt,
                         const detinfer::GenerationConfig& config)
    : queue_(std::make_shared<Queue>()), handle_(std::make_shared<detinfer::RequestHandle>()) {
  std::shared_ptr<Queue> queue = queue_;
  *handle_ = session.submit(prompt, config, [queue](const detinfer::TokenEvent& ev) {
    StreamEvent e{ev.sample_index, ev.text, std::nullopt};
    if (ev.logprobs != nullptr) e.logprobs = *ev.logprobs;
    std::lock_guard<std::mutex> lock(queue->mu);
    queue->events.push_back(std::move(e));
    queue->cv.notify_one();
    return !queue->client_gone;
  });
}

void EventStream::start(detinfer_http::ResponseWriter& w) {
  writer_ = &w;
  w.on_client_gone([queue = queue_, handle = handle_] {
    handle->cancel();
    std::lock_guard<std::mutex> lock(queue->mu);
    queue->client_gone = true;
    queue->cv.notify_one();
  });
  client_ok_ = w.start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
}

void EventStream::send(const json& j) {
  if (client_ok_) client_ok_ = writer_->write("data: " + dump_json(j) + "\n\n");
  if (!client_ok_) handle_->cancel();
}

void EventStream::drain(const std::function<void(StreamEvent&)>& on_event) {
  auto& fut = handle_->future();
  for (;;) {
    std::deque<StreamEvent> batch;
    {
      std::unique_lock<std::mutex> lock(queue_->mu);
      queue_->cv.wait_for(lock, std::chrono::milliseconds(20),
                          [&] { return !queue_->events.empty() || queue_->client_gone; });
      batch.swap(queue_->events);
    }
    for (StreamEvent& ev : batch) on_event(ev);
    if (fut.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      std::lock_guard<std::mutex> lock(queue_->mu);
      if (queue_->events.empty()) break;  // else: drain what arrived meanwhile
    }
  }
}

void EventStream::finish() {
  if (client_ok_) client_ok_ = writer_->write("data: [DONE]\n\n");
  writer_->finish();
}

}  // namespace detinfer_cli
