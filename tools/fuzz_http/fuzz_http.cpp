// libFuzzer target over what `detinfer serve` does with untrusted bytes before any
// inference: the HTTP request parser (fed in pieces whose sizes the input chooses, so
// every split point is exercised) and, for each complete request, the mapping of its body
// to a GenerationConfig (parse_completion_request). Any outcome but a crash, a sanitizer
// report, an exception escaping, or a broken invariant is fine.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/request_parser.h"
#include "openai_protocol.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void map_body(const std::string& body) {
  detinfer_cli::ModelLimits model;
  model.vocab_size = 1000;
  model.context_length = 2048;
  const detinfer_cli::ParseOutcome out =
      detinfer_cli::parse_completion_request(body, "tiny", model);
  if (out.request) {
    const detinfer::GenerationConfig& c = out.request->config;
    check(c.max_new_tokens >= 1 && c.max_new_tokens <= model.context_length);
    check(c.temperature >= 0.0f && c.temperature <= 2.0f);
    check(c.num_return_sequences >= 1 && c.num_return_sequences <= 64);
    check(c.logprobs >= 0 && c.logprobs <= 20);
  } else {
    check(out.error.status >= 400 && out.error.status < 500);
    check(!out.error.message.empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  detinfer_http::HttpLimits limits;
  limits.max_header_bytes = 2048;
  limits.max_request_line = 512;
  limits.max_headers = 16;
  limits.max_body_bytes = 8192;
  const std::size_t piece = 1 + data[0] % 64;  // the input picks the read sizes
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  detinfer_http::RequestParser parser(limits);
  std::string pending;
  while (!rest.empty()) {
    const std::size_t n = rest.size() < piece ? rest.size() : piece;
    pending.append(rest.data(), n);
    rest.remove_prefix(n);
    while (!pending.empty()) {
      const std::size_t used = parser.feed(pending);
      check(used <= pending.size());
      pending.erase(0, used);
      if (parser.status() == detinfer_http::RequestParser::Status::kError) {
        check(parser.error_status() >= 400 && parser.error_status() < 600);
        return 0;  // the server answers and closes
      }
      if (parser.status() != detinfer_http::RequestParser::Status::kComplete) break;
      const detinfer_http::Request req = parser.take();
      check(req.body.size() <= limits.max_body_bytes);
      check(!req.method.empty() && !req.path.empty());
      map_body(req.body);
    }
  }
  return 0;
}
