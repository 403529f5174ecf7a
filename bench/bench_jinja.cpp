// Chat template rendering: the Qwen3 template (tools, thinking) on a 20-message
// conversation with tool calls, parsed once and rendered per iteration; parsing alone.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>

#include "jinja/template.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string& qwen3_source() {
  static const std::string s =
      read_file(std::string(DETINFER_SOURCE_DIR) + "/tests/jinja/fixtures/templates/qwen3.jinja");
  return s;
}

const nlohmann::ordered_json& conversation() {
  static const nlohmann::ordered_json c = nlohmann::ordered_json::parse(
      read_file(std::string(DETINFER_SOURCE_DIR) + "/bench/jinja_conversation.json"));
  return c;
}

constexpr std::int64_t kNow = 1767225600;

void BM_RenderQwen3_20Messages(benchmark::State& state) {
  const auto tpl = detinfer::jinja::Template::parse(qwen3_source());
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string out = tpl.render(conversation(), kNow);
    bytes = out.size();
    benchmark::DoNotOptimize(out);
  }
  state.counters["prompt_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderQwen3_20Messages)->Unit(benchmark::kMicrosecond);

void BM_ParseQwen3(benchmark::State& state) {
  for (auto _ : state) {
    auto tpl = detinfer::jinja::Template::parse(qwen3_source());
    benchmark::DoNotOptimize(tpl);
  }
}
BENCHMARK(BM_ParseQwen3)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
