// Incremental, strict HTTP/1.1 request parser (RFC 9112) with hard limits. It never
// allocates more than the limits allow, whatever the client sends: bytes are consumed as
// they arrive and every limit is checked before the bytes are kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/http_message.h"

namespace detinfer_http {

struct HttpLimits {
  std::size_t max_request_line = 8192;   // "METHOD target HTTP/1.1" (414 above)
  std::size_t max_header_bytes = 16384;  // request line + header fields (431 above)
  std::size_t max_headers = 100;         // header fields (431 above)
  std::size_t max_body_bytes = 1 << 20;  // decoded body, whatever the framing (413 above)
};

class RequestParser {
 public:
  enum class Status : std::uint8_t { kNeedMore, kComplete, kError };

  explicit RequestParser(HttpLimits limits = {}) : limits_(limits) {}

  // Consumes bytes of `data` and returns how many it used: all of them while the request
  // is incomplete; fewer once it is complete (the rest starts the next, pipelined
  // request) or failed.
  std::size_t feed(std::string_view data);

  Status status() const { return status_; }
  // True from the first byte of a request (not counting empty lines before it).
  bool started() const { return started_; }
  // True once the request line and headers are parsed (the body may still be coming).
  bool headers_done() const { return state_ >= State::kBody; }
  // The client sent "Expect: 100-continue" and waits for an interim response.
  bool expects_continue() const { return expect_continue_; }
  // After kError: the status to answer (400, 413, 414, 431, 501, 505) and why.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }
  // After kComplete: whether the connection may carry another request.
  bool keep_alive() const { return keep_alive_; }

  // After kComplete: hands the request over and resets for the next one.
  Request take();

 private:
  enum class State : std::uint8_t {
    kHead,
    kBody,          // after the head: Content-Length body
    kChunkSize,     // chunked: reading a chunk-size line
    kChunkData,     // chunked: inside a chunk
    kChunkDataEnd,  // chunked: the CRLF after a chunk
    kTrailers,      // chunked: trailer fields up to the empty line
    kDone,
    kFailed,
  };

  std::size_t feed_head(std::string_view data);
  std::size_t feed_chunked(std::string_view data);
  bool parse_head();
  bool parse_request_line(std::string_view line);
  bool parse_header_line(std::string_view line);
  bool decide_framing();
  void parse_chunk_size_line(std::string_view line);
  void fail(int status, std::string message);
  void complete();

  HttpLimits limits_;
  State state_ = State::kHead;
  Status status_ = Status::kNeedMore;
  bool started_ = false;
  bool expect_continue_ = false;
  bool keep_alive_ = true;
  int error_status_ = 0;
  std::string error_message_;
  std::string head_;           // request line + headers as received
  std::size_t head_scan_ = 0;  // where to resume looking for the blank line
  std::string line_;           // chunk-size / trailer line being read
  std::size_t trailer_bytes_ = 0;
  std::uint64_t remaining_ = 0;  // bytes left of the body or the current chunk
  Request request_;
};

}  // namespace detinfer_http
