// API keys of `detinfer serve` (serve_auth.h).
#include "serve_auth.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "detinfer/error.h"

namespace detinfer_cli {
namespace {

constexpr std::size_t kMaxKeyBytes = 512;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Compares a and b over max(|a|, |b|) bytes; the branches depend on lengths only.
unsigned char differs(std::string_view a, std::string_view b, std::size_t* count) {
  const std::size_t n = std::max(a.size(), b.size());
  volatile unsigned char d = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    d = static_cast<unsigned char>(d | (x ^ y));
  }
  if (count != nullptr) *count += n;
  return d;
}

detinfer_http::Response unauthorized(const std::string& message, const char* code) {
  detinfer_http::Response r;
  r.status = 401;
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  const nlohmann::json body = {{"error",
                                {{"message", message},
                                 {"type", "invalid_request_error"},
                                 {"param", nullptr},
                                 {"code", code}}}};
  r.body = body.dump();
  return r;
}

}  // namespace

void check_api_key(std::string_view key, const std::string& field) {
  if (key.empty() || key.size() > kMaxKeyBytes) {
    throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                          field + ": an API key must have 1 to 512 bytes", field);
  }
  for (const char c : key) {
    if (c <= ' ' || c > '~' || c == '"' || c == '\\' || c == ',') {
      throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                            field +
                                ": an API key may only hold visible ASCII characters "
                                "(no spaces, quotes, backslashes or commas)",
                            field);
    }
  }
}

std::vector<std::string> read_api_key_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw detinfer::Error(detinfer::ErrorCode::kNotFound,
                          "--api-key-file: cannot read '" + path + "'", "api_key_file");
  }
  std::vector<std::string> keys;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string_view key = trim(line);
    if (key.empty() || key.front() == '#') continue;
    check_api_key(key, path + ":" + std::to_string(n));
    keys.emplace_back(key);
  }
  if (keys.empty()) {
    throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                          "--api-key-file: '" + path + "' holds no key", "api_key_file");
  }
  return keys;
}

std::vector<std::string> resolve_api_keys(const ApiKeyOptions& options) {
  std::vector<std::string> keys;
  for (const auto& k : options.keys) {
    check_api_key(k, "--api-key");
    keys.push_back(k);
  }
  if (!options.key_file.empty()) {
    for (auto& k : read_api_key_file(options.key_file)) keys.push_back(std::move(k));
  }
  return keys;
}

bool api_key_matches(const std::vector<std::string>& keys, std::string_view presented,
                     std::size_t* bytes_compared) {
  if (bytes_compared != nullptr) *bytes_compared = 0;
  // A match is a zero difference for some key: AND the differences of all keys.
  unsigned char all_differ = 1;
  for (const auto& k : keys) {
    all_differ =
        static_cast<unsigned char>(all_differ & (differs(k, presented, bytes_compared) != 0));
  }
  return !keys.empty() && all_differ == 0;
}

std::string bearer_token(std::string_view authorization) {
  const std::string_view v = trim(authorization);
  constexpr std::string_view kScheme = "bearer";
  if (v.size() <= kScheme.size() || !detinfer_http::iequals(v.substr(0, kScheme.size()), kScheme) ||
      v[kScheme.size()] != ' ') {
    return {};
  }
  return std::string(trim(v.substr(kScheme.size())));
}

ServeAuth::ServeAuth(std::vector<std::string> keys, bool protect_health, bool protect_metrics,
                     detinfer::MetricsRegistry& metrics)
    : keys_(std::move(keys)), protect_health_(protect_health), protect_metrics_(protect_metrics) {
  const char* help = "Requests refused for a missing or wrong API key (401)";
  missing_ = metrics.counter("detinfer_http_auth_failures_total", help, {{"reason", "missing"}});
  invalid_ = metrics.counter("detinfer_http_auth_failures_total", help, {{"reason", "invalid"}});
}

bool ServeAuth::protects(const std::string& method, const std::string& path) const {
  if (!enabled() || method == "OPTIONS") return false;  // CORS preflights carry no key
  if (path == "/health") return protect_health_;
  if (path == "/metrics") return protect_metrics_;
  return true;
}

bool ServeAuth::admit(const detinfer_http::Request& request, detinfer_http::ResponseWriter& w,
                      const detinfer_http::Router* router) const {
  if (!protects(request.method, request.path)) return true;
  const std::string token = bearer_token(request.header("Authorization"));
  if (!token.empty() && api_key_matches(keys_, token)) return true;
  detinfer_http::Response r;
  if (token.empty()) {
    missing_.inc();
    r = unauthorized("Missing API key: send it as 'Authorization: Bearer <key>'.",
                     "missing_api_key");
  } else {
    invalid_.inc();  // the presented key is never echoed or logged
    r = unauthorized("Incorrect API key provided.", "invalid_api_key");
  }
  if (router != nullptr) {
    const std::string origin = router->allowed_origin(request.header("Origin"));
    if (!origin.empty()) r.headers.emplace_back("Access-Control-Allow-Origin", origin);
  }
  w.respond(std::move(r));
  return false;
}

}  // namespace detinfer_cli
