// JSON over HTTP to a `detinfer serve` under test (cpp-httplib client): a POST and the
// events of a server-sent-events body. Shared by the chat and tool-call server tests.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace detinfer::testing {

// {status, body text}; status -1 when no response came back.
inline std::pair<int, std::string> post(int port, const std::string& path,
                                        const nlohmann::json& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(10, 0);
  c.set_read_timeout(120, 0);
  const httplib::Result r = c.Post(path, body.dump(), "application/json");
  if (!r) return {-1, httplib::to_string(r.error())};
  return {r->status, r->body};
}

// The `data:` payloads of an event stream, parsed ("[DONE]" as that string; a payload
// that is not JSON as a discarded value).
inline std::vector<nlohmann::json> sse_events(const std::string& body) {
  std::vector<nlohmann::json> events;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) != 0) continue;
    const std::string data = line.substr(6);
    events.push_back(data == "[DONE]" ? nlohmann::json("[DONE]")
                                      : nlohmann::json::parse(data, nullptr, false));
  }
  return events;
}

}  // namespace detinfer::testing
