// The transport-independent HTTP layer of `detinfer serve`: a handler receives a parsed
// request and answers through a ResponseWriter, either with one complete response or with
// a stream of chunks. Handlers never see sockets, so routes are testable without a network
// and the transport (http_server.h, an epoll loop) can change without touching them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace detinfer_http {

using Headers = std::vector<std::pair<std::string, std::string>>;

// ASCII case-insensitive comparison (header names, tokens such as "chunked").
bool iequals(std::string_view a, std::string_view b);

// One request, fully received (the body is decoded when it came chunked).
struct Request {
  std::string method;     // "GET", "POST", ... (case-sensitive, as RFC 9110 says)
  std::string target;     // as sent: "/v1/completions?fingerprint=full"
  std::string path;       // target before '?'
  std::string query;      // target after '?' ("" when none)
  int version_minor = 1;  // HTTP/1.<minor>
  Headers headers;        // in arrival order, names as sent
  std::string body;
  std::string peer;  // client address ("127.0.0.1"); "" when unknown

  // The first header named `name` (case-insensitive); "" when absent.
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  // The value of `key` in the query string (no percent-decoding beyond '+'/%XX); "" if absent.
  std::string query_param(std::string_view key) const;
};

// A complete response. Content-Length, Date-less framing and Connection are added by
// the transport.
struct Response {
  int status = 200;
  Headers headers;  // extra headers (Content-Type goes in content_type)
  std::string content_type = "application/json";
  std::string body;
};

// Where a handler writes its answer. Exactly one of respond() or start_stream() ...
// finish() must be called; the transport answers 500 if a handler returns without
// either. Methods may be called from any one thread (the handler's worker thread).
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // Sends a complete response (head and body in one write where the socket allows).
  virtual void respond(Response response) = 0;
  // Starts a streamed response (chunked for HTTP/1.1). Returns false when the client is
  // already gone.
  virtual bool start_stream(int status, const std::string& content_type,
                            const Headers& headers) = 0;
  // Queues one piece of a stream. Returns false once the client is gone (closed, reset,
  // or not reading while too much output is pending): stop producing then.
  virtual bool write(std::string_view chunk) = 0;
  // Ends a stream (the terminating chunk).
  virtual void finish() = 0;
  // True once the client has closed or reset the connection.
  virtual bool client_gone() const = 0;
  // Registers a function called (at most once, from the transport's thread) when the
  // client goes away before the response is complete: cancel the work it asked for.
  // Called at once when the client is already gone. Must be short and must not call
  // back into this writer.
  virtual void on_client_gone(std::function<void()> callback) = 0;
};

// A route handler: runs on a worker thread, may block (inference), never on the event
// loop.
using Handler = std::function<void(const Request&, ResponseWriter&)>;

// Decodes %XX escapes (and '+' as space, as in a query string).
std::string percent_decode(std::string_view s);

// The standard reason phrase of `status` ("OK", "Bad Request", ...).
const char* reason_phrase(int status);

}  // namespace detinfer_http
