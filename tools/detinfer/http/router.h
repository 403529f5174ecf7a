// Routing over the transport-independent interface: (method, path) -> Handler, with the
// answers HTTP requires around it: 404 for an unknown path, 405 with `Allow` for a known
// path and another method, OPTIONS (and CORS preflight) for any known path, and CORS
// headers on responses when the request's Origin is allowed.
#pragma once

#include <string>
#include <vector>

#include "http/http_message.h"

namespace detinfer_http {

struct CorsOptions {
  // Origins allowed to call from a browser ("https://app.example"), or "*" for any.
  // Empty (the default): no CORS headers, and preflights get no permission.
  std::vector<std::string> allowed_origins;
  int max_age_s = 600;  // Access-Control-Max-Age of a preflight answer
};

class Router {
 public:
  using ErrorFn = std::function<Response(int status, const std::string& message)>;
  explicit Router(ErrorFn error, CorsOptions cors = {})
      : error_(std::move(error)), cors_(std::move(cors)) {}

  // `pattern` is an exact path ("/v1/models"), or ends in "/{}" to match one more
  // non-empty segment ("/v1/models/{}" matches "/v1/models/tiny"; the handler reads it
  // from Request::path).
  void add(std::string method, std::string pattern, Handler handler);

  // Dispatches one request (use as the server's Handler).
  void handle(const Request& request, ResponseWriter& writer) const;

  // The Access-Control-Allow-Origin value for `origin` ("" when not allowed).
  std::string allowed_origin(const std::string& origin) const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    Handler handler;
  };
  static bool matches(const std::string& pattern, const std::string& path);
  void preflight(const Request& request, const std::string& allow, ResponseWriter& w) const;

  ErrorFn error_;
  CorsOptions cors_;
  std::vector<Route> routes_;
};

}  // namespace detinfer_http
