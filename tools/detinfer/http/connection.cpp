#include "http/connection.h"

#include <cstdio>

namespace detinfer_http {

void Connection::queue_output(const std::string& bytes) {
  if (pending() == 0) out_since = Clock::now();
  out += bytes;
}

DeadlineAction deadline_action(Connection& c, Clock::time_point now, const DeadlineLimits& limits,
                               bool stopping) {
  if (c.fd < 0) return DeadlineAction::kNone;
  if (c.lingering) return now >= c.linger_until ? DeadlineAction::kClose : DeadlineAction::kNone;
  bool busy, done;
  std::size_t pending;
  Clock::time_point out_since;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    busy = c.busy;
    done = c.response_done;
    pending = c.pending();
    out_since = c.out_since;
  }
  if (pending > 0)
    return now - out_since > limits.write ? DeadlineAction::kClose : DeadlineAction::kNone;
  if (busy || done) return DeadlineAction::kNone;
  if (c.parser.started()) {
    return now - c.request_started > limits.request ? DeadlineAction::kRequestTimeout
                                                    : DeadlineAction::kNone;
  }
  return now - c.last_activity > limits.keep_alive || stopping ? DeadlineAction::kClose
                                                               : DeadlineAction::kNone;
}

std::string ConnectionWriter::head(int status, const std::string& content_type,
                                   const Headers& headers, const std::string* length_of) const {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  if (!content_type.empty()) h += "Content-Type: " + content_type + "\r\n";
  for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
  const bool close =
      !keep_alive_ || host_.shutting_down() || (length_of == nullptr && version_minor_ == 0);
  if (length_of != nullptr && status == 204) {
    // no body, no length (RFC 9110 8.6)
  } else if (length_of != nullptr) {
    h += "Content-Length: " + std::to_string(length_of->size()) + "\r\n";
  } else if (version_minor_ >= 1) {
    h += "Transfer-Encoding: chunked\r\n";
  }
  h += close ? "Connection: close\r\n\r\n" : "\r\n";
  return h;
}

bool ConnectionWriter::append(const std::string& bytes, bool last) {
  {
    std::lock_guard<std::mutex> lock(c_->mu);
    if (c_->gone) return false;
    if (!last && c_->pending() > host_.max_pending_output()) {
      // The client does not read: drop it rather than buffer without bound.
      c_->gone = true;
    } else {
      c_->queue_output(bytes);
      if (last) {
        c_->response_done = true;
        c_->close_after =
            c_->close_after || !keep_alive_ || host_.shutting_down() || version_minor_ == 0;
      }
    }
  }
  host_.notify(c_->id);
  std::lock_guard<std::mutex> lock(c_->mu);
  return !c_->gone;
}

void ConnectionWriter::respond(Response r) {
  if (state_ != State::kNone) return;
  state_ = State::kDone;
  std::string bytes = head(r.status, r.content_type, r.headers, &r.body);
  if (!head_only_) bytes += r.body;
  host_.count_response(r.status);
  append(bytes, true);
}

bool ConnectionWriter::start_stream(int status, const std::string& content_type,
                                    const Headers& headers) {
  if (state_ != State::kNone) return false;
  state_ = State::kStreaming;
  host_.count_response(status);
  return append(head(status, content_type, headers, nullptr), false);
}

bool ConnectionWriter::write(std::string_view chunk) {
  if (state_ != State::kStreaming) return false;
  if (chunk.empty()) return !client_gone();
  std::string framed;
  if (version_minor_ >= 1) {
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
    framed = size;
    framed.append(chunk.data(), chunk.size());
    framed += "\r\n";
  } else {
    framed.assign(chunk.data(), chunk.size());
  }
  return append(framed, false);
}

void ConnectionWriter::finish() {
  if (state_ != State::kStreaming) return;
  state_ = State::kDone;
  append(version_minor_ >= 1 ? "0\r\n\r\n" : "", true);
}

bool ConnectionWriter::client_gone() const {
  std::lock_guard<std::mutex> lock(c_->mu);
  return c_->gone;
}

void ConnectionWriter::on_client_gone(std::function<void()> callback) {
  {
    std::lock_guard<std::mutex> lock(c_->mu);
    if (!c_->gone) {
      c_->on_gone = std::move(callback);
      return;
    }
  }
  callback();
}

}  // namespace detinfer_http
