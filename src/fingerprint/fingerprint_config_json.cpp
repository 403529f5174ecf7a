#include "fingerprint/fingerprint_config_json.h"

#include <limits>

#include "core/check.h"

namespace detinfer::fingerprint_detail {

json config_to_json(const GenerationConfig& c) {
  json j = {{"max_new_tokens", c.max_new_tokens},
            {"temperature", c.temperature},
            {"top_k", c.top_k},
            {"top_p", c.top_p},
            {"min_p", c.min_p},
            {"repetition_penalty", c.repetition_penalty},
            {"presence_penalty", c.presence_penalty},
            {"frequency_penalty", c.frequency_penalty},
            {"num_return_sequences", c.num_return_sequences},
            {"first_sample_index", c.first_sample_index},
            {"num_beams", c.num_beams},
            {"length_penalty", c.length_penalty},
            {"early_stopping", c.early_stopping},
            {"stop_strings", c.stop_strings},
            {"logprobs", c.logprobs},
            {"ignore_eos", c.ignore_eos}};
  j["stop_token_ids"] = c.stop_token_ids ? json(*c.stop_token_ids) : json(nullptr);
  return j;
}

GenerationConfig config_from_json(const json& j, const std::string& path) {
  constexpr std::int64_t kI32Min = std::numeric_limits<std::int32_t>::min();
  constexpr std::int64_t kI32Max = std::numeric_limits<std::int32_t>::max();
  ObjectReader r(j, path);
  GenerationConfig c;
  auto i32 = [&](const char* key) {
    return static_cast<std::int32_t>(r.integer(key, kI32Min, kI32Max));
  };
  // Values are stored as the float the session used; JSON keeps them as doubles that
  // round back to the same float.
  auto f32 = [&](const char* key) {
    const double d = r.number(key);
    if (d > std::numeric_limits<float>::max() || d < -std::numeric_limits<float>::max()) {
      fail(ErrorCode::kCorrupt, "fingerprint field ", r.path_of(key), ": ", d,
           " is outside the float range");
    }
    return static_cast<float>(d);
  };
  c.max_new_tokens = i32("max_new_tokens");
  c.temperature = f32("temperature");
  c.top_k = i32("top_k");
  c.top_p = f32("top_p");
  c.min_p = f32("min_p");
  c.repetition_penalty = f32("repetition_penalty");
  c.presence_penalty = f32("presence_penalty");
  c.frequency_penalty = f32("frequency_penalty");
  c.num_return_sequences = i32("num_return_sequences");
  c.first_sample_index = static_cast<std::uint32_t>(
      r.integer("first_sample_index", 0, std::numeric_limits<std::uint32_t>::max()));
  c.num_beams = i32("num_beams");
  c.length_penalty = f32("length_penalty");
  c.early_stopping = r.boolean("early_stopping");
  {
    const std::string p = r.path_of("stop_strings");
    const json& a = r.array("stop_strings");
    for (std::size_t i = 0; i < a.size(); ++i) {
      c.stop_strings.push_back(as_string(a[i], p + "[" + std::to_string(i) + "]"));
    }
  }
  c.logprobs = i32("logprobs");
  c.ignore_eos = r.boolean("ignore_eos");
  const json& stop = r.required("stop_token_ids");
  if (!stop.is_null()) {
    const std::string p = r.path_of("stop_token_ids");
    const json& a = as_array(stop, p);
    std::vector<std::int32_t> ids;
    for (std::size_t i = 0; i < a.size(); ++i) {
      ids.push_back(static_cast<std::int32_t>(
          as_integer(a[i], p + "[" + std::to_string(i) + "]", kI32Min, kI32Max)));
    }
    c.stop_token_ids = std::move(ids);
  }
  r.done();
  return c;
}

}  // namespace detinfer::fingerprint_detail
