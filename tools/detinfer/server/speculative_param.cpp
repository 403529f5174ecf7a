#include "speculative_param.h"

#include <string>

#include "core/generation_fields.h"
#include "openai_protocol.h"

namespace detinfer_cli {

namespace {

constexpr const char* kParam = "speculative";
constexpr std::int32_t kDefaultDraftTokens = 4;  // as the CLI's --speculative
const char* const kFlat[] = {"draft_tokens", "draft_with_model", "draft_ngram_min",
                             "draft_ngram_max"};

std::int32_t read_count(const nlohmann::json& v, const char* key, std::int32_t max) {
  const nlohmann::json& x = v[key];
  if (!x.is_number_integer() || x.get<std::int64_t>() < 1 || x.get<std::int64_t>() > max) {
    reject(kParam, std::string("'speculative.") + key + "' must be an integer in [1, " +
                       std::to_string(max) + "]");
  }
  return static_cast<std::int32_t>(x.get<std::int64_t>());
}

}  // namespace

void read_speculative(const nlohmann::json& body, detinfer::GenerationConfig& c,
                      FieldSources& sources) {
  if (!body.contains(kParam) || body[kParam].is_null()) return;
  const nlohmann::json& v = body[kParam];
  if (!v.is_object()) reject(kParam, "'speculative' must be an object");
  for (const char* flat : kFlat) {
    if (body.contains(flat) && !body[flat].is_null()) {
      reject(kParam, std::string("'speculative' cannot be combined with '") + flat + "'");
    }
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    if (k != "mode" && k != "draft_tokens" && k != "ngram_min" && k != "ngram_max") {
      reject(kParam, "unknown parameter 'speculative." + k + "'");
    }
  }
  if (!v.contains("mode") || !v["mode"].is_string()) {
    reject(kParam, "'speculative.mode' must be \"off\", \"ngram\" or \"draft\"");
  }
  const std::string mode = v["mode"].get<std::string>();
  if (mode != "off" && mode != "ngram" && mode != "draft") {
    reject(kParam,
           "'speculative.mode' must be \"off\", \"ngram\" or \"draft\", got '" + mode + "'");
  }
  using detinfer::core::kMaxDraftNgram;
  using detinfer::core::kMaxDraftTokens;
  const std::int32_t tokens =
      v.contains("draft_tokens") ? read_count(v, "draft_tokens", kMaxDraftTokens) : 0;
  if (v.contains("ngram_min")) c.draft_ngram_min = read_count(v, "ngram_min", kMaxDraftNgram);
  if (v.contains("ngram_max")) c.draft_ngram_max = read_count(v, "ngram_max", kMaxDraftNgram);
  if (c.draft_ngram_min > c.draft_ngram_max) {
    reject(kParam, "'speculative.ngram_min' must be at most 'speculative.ngram_max'");
  }
  c.draft_tokens = mode == "off" ? 0 : (tokens > 0 ? tokens : kDefaultDraftTokens);
  c.draft_with_model = mode == "draft";
  for (const char* flat : kFlat) sources.set(flat, FieldSource::kClient);
}

}  // namespace detinfer_cli
