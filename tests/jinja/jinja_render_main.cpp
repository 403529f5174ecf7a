// jinja_render: renders requests read from stdin, one JSON object per line
// ({"template": ..., "context": ...}), and writes one JSON line per request:
// {"output": ...} or {"error": ..., "field": ...}. The live conformance test
// (live_conformance.py) drives it to compare against Python Jinja2.
#include <iostream>
#include <string>

#include "detinfer/error.h"
#include "jinja/conformance_context.h"
#include "jinja/template.h"

int main() {
  using nlohmann::ordered_json;
  std::string line;
  while (std::getline(std::cin, line)) {
    ordered_json result;
    try {
      const ordered_json request = ordered_json::parse(line);
      const auto tpl = detinfer::jinja::Template::parse(request.at("template").get<std::string>());
      result["output"] = tpl.render(request.at("context"), detinfer::jinja::kConformanceNow);
    } catch (const detinfer::Error& e) {
      result["error"] = e.message();
      result["field"] = e.field();
    } catch (const std::exception& e) {
      result["error"] = std::string("harness: ") + e.what();
      result["field"] = "";
    }
    std::cout << result.dump() << std::endl;
  }
  return 0;
}
