#include "model/rope_config.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "core/check.h"
#include "core/log.h"

namespace detinfer::model {
namespace {

constexpr std::int64_t kMaxPositions = std::int64_t{1} << 24;
constexpr double kMaxFactor = 1e6;

// A longrope factor list: one finite number in (0, 1e6] per rotated dimension pair.
std::vector<double> factor_list(core::ObjectReader& r, const char* key, std::int64_t half) {
  const core::json& a = r.array(key);
  const std::string path = r.path_of(key);
  if (static_cast<std::int64_t>(a.size()) != half) {
    fail(ErrorCode::kCorrupt, path, ": ", a.size(), " entries, expected ", half,
         " (the rotated dimensions per head / 2)");
  }
  std::vector<double> out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    const double v = core::as_number(a[i], at);
    if (!(v > 0.0 && v <= kMaxFactor))
      fail(ErrorCode::kCorrupt, at, ": ", v, " is not in (0, 1e6]");
    out.push_back(v);
  }
  return out;
}

// original_max_position_embeddings: rope_scaling's, else config.json's top-level one
// (Phi-3 writes it there), else `fallback`.
std::int64_t original_positions(core::ObjectReader& f, core::ObjectReader& r,
                                std::int64_t fallback) {
  const std::int64_t top =
      f.integer_or("original_max_position_embeddings", 1, kMaxPositions, fallback);
  return r.integer_or("original_max_position_embeddings", 1, kMaxPositions, top);
}

void parse_yarn(core::ObjectReader& f, core::ObjectReader& r, ModelConfig& c) {
  RopeScaling& s = c.rope_scaling;
  s.original_max_position_embeddings = original_positions(f, r, c.max_position_embeddings);
  const double ratio = static_cast<double>(c.max_position_embeddings) /
                       static_cast<double>(s.original_max_position_embeddings);
  s.factor = r.number_or("factor", 1.0, kMaxFactor, ratio);
  s.beta_fast = r.number_or("beta_fast", 1e-6, 1e6, 32.0);
  s.beta_slow = r.number_or("beta_slow", 1e-6, 1e6, 1.0);
  s.mscale = r.number_or("mscale", 0.0, 1e6, 0.0);
  s.mscale_all_dim = r.number_or("mscale_all_dim", 0.0, 1e6, 0.0);
  s.truncate = r.boolean_or("truncate", true);
  s.attention_factor = r.number_or("attention_factor", 1e-6, 1e6, 0.0);
  if (s.factor < 1.0) fail(ErrorCode::kCorrupt, r.path_of("factor"), ": below 1");
}

void parse_longrope(core::ObjectReader& f, core::ObjectReader& r, ModelConfig& c) {
  RopeScaling& s = c.rope_scaling;
  // Phi3Config always has original_max_position_embeddings (4096 unless given).
  const std::int64_t fallback =
      c.architecture == Architecture::kPhi3 ? 4096 : c.max_position_embeddings;
  s.original_max_position_embeddings = original_positions(f, r, fallback);
  const double ratio = static_cast<double>(c.max_position_embeddings) /
                       static_cast<double>(s.original_max_position_embeddings);
  s.factor = r.number_or("factor", 1e-6, kMaxFactor, ratio);
  s.attention_factor = r.number_or("attention_factor", 1e-6, 1e6, 0.0);
  s.short_factor = factor_list(r, "short_factor", rope_dims(c) / 2);
  s.long_factor = factor_list(r, "long_factor", rope_dims(c) / 2);
  // transformers switches to long_factor once a sequence passes the original length and
  // rotates the keys cached before with the short one: a result that would depend on
  // chunking. detinfer keeps short_factor and the original length as its context limit.
  if (c.max_position_embeddings > s.original_max_position_embeddings) {
    logger().info("{}: longrope: context limited to original_max_position_embeddings {}", f.path(),
                  s.original_max_position_embeddings);
    c.max_position_embeddings = s.original_max_position_embeddings;
  }
}

void parse_llama3(core::ObjectReader& f, core::ObjectReader& r, RopeScaling& s) {
  s.factor = r.number_or("factor", 1.0, kMaxFactor, 8.0);
  s.low_freq_factor = r.number_or("low_freq_factor", 1e-6, 1e6, 1.0);
  s.high_freq_factor = r.number_or("high_freq_factor", 1e-6, 1e6, 4.0);
  s.original_max_position_embeddings =
      r.integer_or("original_max_position_embeddings", 1, kMaxPositions, 8192);
  if (!(s.high_freq_factor > s.low_freq_factor)) {
    fail(ErrorCode::kCorrupt, f.path(),
         ": rope_scaling high_freq_factor must exceed low_freq_factor");
  }
}

}  // namespace

std::string hex_bits(double d) {
  std::uint64_t u = 0;
  std::memcpy(&u, &d, sizeof u);
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(u));
  return buf;
}

void parse_rope_scaling(core::ObjectReader& f, ModelConfig& c) {
  if (!f.has("rope_scaling")) return;
  core::ObjectReader r = f.object("rope_scaling");
  std::string type = r.string_or("rope_type", r.string_or("type", ""));
  if (type.empty() || type == "default") return;
  if (c.architecture == Architecture::kPhi3) {
    // Phi3Config renames the early "su" and "yarn" to longrope and accepts nothing else.
    if (type == "su" || type == "yarn") type = "longrope";
    if (type != "longrope") {
      fail(ErrorCode::kUnsupported, f.path(), ": rope_scaling type '", type,
           "' (Phi3ForCausalLM accepts only default and longrope)");
    }
  }
  // (partial_rotary_factor: model_config.cpp, before this.)
  RopeScaling& s = c.rope_scaling;
  s.type = type;
  if (type == "llama3") {
    parse_llama3(f, r, s);
  } else if (type == "linear" || type == "dynamic") {
    s.factor = r.number_or("factor", 1.0, kMaxFactor, 1.0);
    if (!r.has("factor")) fail(ErrorCode::kCorrupt, r.path_of("factor"), " is missing");
  } else if (type == "yarn") {
    parse_yarn(f, r, c);
  } else if (type == "longrope") {
    parse_longrope(f, r, c);
  } else {
    fail(ErrorCode::kUnsupported, f.path(), ": rope_scaling type '", type,
         "' is not supported (supported: default, linear, dynamic, llama3, yarn, longrope)");
  }
}

void write_rope_scaling(std::ostream& os, const RopeScaling& s) {
  os << "rope_scaling.type=" << s.type << "\n";
  if (s.type.empty()) return;
  os << "rope_scaling.factor=" << hex_bits(s.factor) << "\n";
  if (s.type == "llama3") {
    os << "rope_scaling.low_freq_factor=" << hex_bits(s.low_freq_factor) << "\n"
       << "rope_scaling.high_freq_factor=" << hex_bits(s.high_freq_factor) << "\n";
  }
  if (s.type == "llama3" || s.type == "yarn" || s.type == "longrope") {
    os << "rope_scaling.original_max_position_embeddings=" << s.original_max_position_embeddings
       << "\n";
  }
  if (s.type == "yarn") {
    os << "rope_scaling.beta_fast=" << hex_bits(s.beta_fast) << "\n"
       << "rope_scaling.beta_slow=" << hex_bits(s.beta_slow) << "\n"
       << "rope_scaling.mscale=" << hex_bits(s.mscale) << "\n"
       << "rope_scaling.mscale_all_dim=" << hex_bits(s.mscale_all_dim) << "\n"
       << "rope_scaling.truncate=" << (s.truncate ? 1 : 0) << "\n";
  }
  if (s.type == "yarn" || s.type == "longrope") {
    os << "rope_scaling.attention_factor=" << hex_bits(s.attention_factor) << "\n";
  }
  for (const auto* list : {&s.short_factor, &s.long_factor}) {
    if (list->empty()) continue;
    os << (list == &s.short_factor ? "rope_scaling.short_factor=" : "rope_scaling.long_factor=");
    for (std::size_t i = 0; i < list->size(); ++i) os << (i ? "," : "") << hex_bits((*list)[i]);
    os << "\n";
  }
}

}  // namespace detinfer::model
