#include "http/router.h"

namespace detinfer_http {

namespace {

// Adds CORS response headers to whatever the handler answers.
class CorsWriter : public ResponseWriter {
 public:
  CorsWriter(ResponseWriter& inner, std::string origin)
      : inner_(inner), origin_(std::move(origin)) {}
  void respond(Response r) override {
    add(r.headers);
    inner_.respond(std::move(r));
  }
  bool start_stream(int status, const std::string& content_type, const Headers& headers) override {
    Headers h = headers;
    add(h);
    return inner_.start_stream(status, content_type, h);
  }
  bool write(std::string_view chunk) override { return inner_.write(chunk); }
  void finish() override { inner_.finish(); }
  bool client_gone() const override { return inner_.client_gone(); }
  void on_client_gone(std::function<void()> cb) override { inner_.on_client_gone(std::move(cb)); }

 private:
  void add(Headers& h) const {
    h.emplace_back("Access-Control-Allow-Origin", origin_);
    h.emplace_back("Vary", "Origin");
  }
  ResponseWriter& inner_;
  std::string origin_;
};

}  // namespace

void Router::add(std::string method, std::string pattern, Handler handler) {
  routes_.push_back({std::move(method), std::move(pattern), std::move(handler)});
}

bool Router::matches(const std::string& pattern, const std::string& path) {
  const std::string wildcard = "/{}";
  if (pattern.size() > wildcard.size() &&
      pattern.compare(pattern.size() - wildcard.size(), wildcard.size(), wildcard) == 0) {
    const std::size_t prefix = pattern.size() - 2;  // keeps the '/'
    return path.size() > prefix && path.compare(0, prefix, pattern, 0, prefix) == 0 &&
           path.find('/', prefix) == std::string::npos;
  }
  return pattern == path;
}

std::string Router::allowed_origin(const std::string& origin) const {
  if (origin.empty()) return "";
  for (const std::string& o : cors_.allowed_origins) {
    if (o == "*" || o == origin) return origin;
  }
  return "";
}

void Router::preflight(const Request& request, const std::string& allow, ResponseWriter& w) const {
  Response r;
  r.status = 204;
  r.content_type.clear();
  r.headers.emplace_back("Allow", allow);
  const std::string origin = allowed_origin(request.header("Origin"));
  if (!origin.empty() && request.has_header("Access-Control-Request-Method")) {
    r.headers.emplace_back("Access-Control-Allow-Origin", origin);
    r.headers.emplace_back("Access-Control-Allow-Methods", allow);
    const std::string asked = request.header("Access-Control-Request-Headers");
    r.headers.emplace_back("Access-Control-Allow-Headers",
                           asked.empty() ? "Content-Type, Authorization" : asked);
    r.headers.emplace_back("Access-Control-Max-Age", std::to_string(cors_.max_age_s));
    r.headers.emplace_back("Vary", "Origin");
  }
  w.respond(std::move(r));
}

void Router::handle(const Request& request, ResponseWriter& writer) const {
  std::string allow;
  const Route* route = nullptr;
  for (const Route& r : routes_) {
    if (!matches(r.pattern, request.path)) continue;
    if (allow.find(r.method) == std::string::npos) allow += (allow.empty() ? "" : ", ") + r.method;
    if (r.method == request.method && route == nullptr) route = &r;
  }
  // HEAD is GET without the body (RFC 9110 9.3.2): a GET route answers it; the transport
  // sends the head only.
  if (route == nullptr && request.method == "HEAD") {
    for (const Route& r : routes_) {
      if (r.method == "GET" && matches(r.pattern, request.path)) {
        route = &r;
        break;
      }
    }
  }
  if (allow.find("GET") != std::string::npos && allow.find("HEAD") == std::string::npos) {
    allow += ", HEAD";
  }
  if (allow.empty()) {
    writer.respond(error_(404, "no such endpoint: " + request.path));
    return;
  }
  allow += ", OPTIONS";
  if (request.method == "OPTIONS") {
    preflight(request, allow, writer);
    return;
  }
  if (route == nullptr) {
    Response r = error_(405, "method " + request.method + " is not allowed on " + request.path +
                                 " (allowed: " + allow + ")");
    r.headers.emplace_back("Allow", allow);
    writer.respond(std::move(r));
    return;
  }
  const std::string origin = allowed_origin(request.header("Origin"));
  if (origin.empty()) {
    route->handler(request, writer);
    return;
  }
  CorsWriter cors(writer, origin);
  route->handler(request, cors);
}

}  // namespace detinfer_http
