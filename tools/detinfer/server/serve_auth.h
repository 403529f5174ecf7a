// API keys of `detinfer serve` (docs/server.md, "API keys"): a check in front of the
// router. With at least one key, every request needs `Authorization: Bearer <key>`
// naming one of them, except CORS preflights (OPTIONS) and, unless protected by flag,
// GET /health and /metrics. A refused request gets 401 with an OpenAI-style error body
// and `WWW-Authenticate: Bearer`, and counts in detinfer_http_auth_failures_total
// {reason="missing"|"invalid"}. Keys are compared in constant time and never logged,
// echoed or exported as metrics.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "detinfer/metrics.h"
#include "http/http_message.h"
#include "http/router.h"

namespace detinfer_cli {

// Where the keys come from (flags --api-key, --api-key-file, --auth-health,
// --auth-metrics; the last three are also config-file keys auth.*).
struct ApiKeyOptions {
  std::vector<std::string> keys;  // --api-key (repeatable)
  std::string key_file;           // one key per line; '#' comments and blank lines skipped
  bool protect_health = false;    // /health needs a key too
  bool protect_metrics = false;   // /metrics needs a key too
};

// Throws Error(kInvalidArgument) naming `field` unless `key` is 1..512 bytes of visible
// ASCII (RFC 6750 token characters: no spaces, quotes or control bytes).
void check_api_key(std::string_view key, const std::string& field);
// The keys of a key file (each checked). Error(kNotFound) when it cannot be read,
// Error(kInvalidArgument) naming the file and line for a bad key or a file without any.
std::vector<std::string> read_api_key_file(const std::string& path);
// options.keys plus the file's keys.
std::vector<std::string> resolve_api_keys(const ApiKeyOptions& options);

// True when `presented` equals one of `keys`. Constant time in the contents: every key is
// compared with every byte up to the longer of the two lengths, whatever matched before,
// and no key ends the loop early. `bytes_compared`, when given, receives the number of
// byte comparisons made (the tests check that it does not depend on where keys differ).
bool api_key_matches(const std::vector<std::string>& keys, std::string_view presented,
                     std::size_t* bytes_compared = nullptr);

// The token of an `Authorization: Bearer <token>` header value ("" when the value is
// not a Bearer credential). The scheme is case-insensitive.
std::string bearer_token(std::string_view authorization);

class ServeAuth {
 public:
  // keys empty: authentication is off and admit() passes everything.
  ServeAuth(std::vector<std::string> keys, bool protect_health, bool protect_metrics,
            detinfer::MetricsRegistry& metrics);

  bool enabled() const { return !keys_.empty(); }
  // Whether a request for `path` with `method` needs a key.
  bool protects(const std::string& method, const std::string& path) const;
  // Passes the request on (true), or answers 401 through `w` and returns false. `router`
  // (optional) adds the CORS header a browser needs to read the 401.
  bool admit(const detinfer_http::Request& request, detinfer_http::ResponseWriter& w,
             const detinfer_http::Router* router = nullptr) const;

 private:
  std::vector<std::string> keys_;
  bool protect_health_;
  bool protect_metrics_;
  detinfer::Counter missing_;
  detinfer::Counter invalid_;
};

}  // namespace detinfer_cli
