// The render context of a conformance case, built as gen_expected.py's context() builds
// it (what transformers' apply_chat_template passes).
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

namespace detinfer::jinja {

inline constexpr std::int64_t kConformanceNow = 1767225600;  // gen_expected.py's NOW

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline nlohmann::ordered_json read_json(const std::string& path) {
  return nlohmann::ordered_json::parse(read_text(path));
}

inline nlohmann::ordered_json conformance_context(const nlohmann::ordered_json& spec,
                                                  const nlohmann::ordered_json& conv) {
  nlohmann::ordered_json ctx;
  ctx["messages"] = conv["messages"];
  ctx["tools"] = conv.contains("tools") ? conv["tools"] : nlohmann::ordered_json();
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = conv["add_generation_prompt"];
  for (const auto& [key, value] : spec.items()) {
    if (key != "file" && !value.is_null()) ctx[key] = value;
  }
  if (conv.contains("extra")) {
    for (const auto& [key, value] : conv["extra"].items()) ctx[key] = value;
  }
  return ctx;
}

}  // namespace detinfer::jinja
