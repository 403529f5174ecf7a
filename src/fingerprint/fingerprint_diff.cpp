#include "detinfer/fingerprint_diff.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "fingerprint/fingerprint_config_json.h"

namespace detinfer {

using fingerprint::json;

const char* to_string(FingerprintGroup g) {
  switch (g) {
    case FingerprintGroup::kModel:
      return "model";
    case FingerprintGroup::kTokenizer:
      return "tokenizer";
    case FingerprintGroup::kPrompt:
      return "prompt";
    case FingerprintGroup::kConfig:
      return "config";
    case FingerprintGroup::kSeed:
      return "seed";
    case FingerprintGroup::kNumerics:
      return "numerics";
    case FingerprintGroup::kLibrary:
      return "library";
    case FingerprintGroup::kDevice:
      return "device";
    case FingerprintGroup::kEnvironment:
      return "environment";
  }
  return "unknown";
}

bool is_input_group(FingerprintGroup g) { return g <= FingerprintGroup::kSeed; }

namespace {
std::string abbreviate(std::string s) {
  constexpr std::size_t kMax = 80;
  if (s.size() > kMax) s = s.substr(0, kMax - 3) + "...";
  return s;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

std::string token_list_text(const std::optional<std::vector<std::int32_t>>& ids) {
  if (!ids) return "(not stored)";
  std::string out;
  for (std::int32_t t : *ids) out += (out.empty() ? "" : ",") + std::to_string(t);
  return "[" + out + "]";
}

// Collects "field: a vs b" lines for one group.
class GroupCompare {
 public:
  explicit GroupCompare(FingerprintGroup g) : diff_{g, {}} {}
  GroupCompare& field(const std::string& name, const std::string& a, const std::string& b) {
    if (a != b) diff_.fields.push_back(name + ": " + abbreviate(a) + " vs " + abbreviate(b));
    return *this;
  }
  template <typename T>
  GroupCompare& num(const std::string& name, const T& a, const T& b) {
    return field(name, std::to_string(a), std::to_string(b));
  }
  // Every key of two JSON objects, as "prefix.key".
  GroupCompare& object(const std::string& prefix, const json& a, const json& b) {
    json keys = json::object();
    for (auto it = a.begin(); it != a.end(); ++it) keys[it.key()] = true;
    for (auto it = b.begin(); it != b.end(); ++it) keys[it.key()] = true;
    for (auto it = keys.begin(); it != keys.end(); ++it) {
      const auto& k = it.key();
      field(prefix + k, a.contains(k) ? a[k].dump() : "(unset)",
            b.contains(k) ? b[k].dump() : "(unset)");
    }
    return *this;
  }
  void add_to(std::vector<GroupDifference>& out) {
    if (!diff_.fields.empty()) out.push_back(std::move(diff_));
  }

 private:
  GroupDifference diff_;
};

std::vector<GroupDifference> compare_groups(const RunFingerprint& a, const RunFingerprint& b) {
  std::vector<GroupDifference> out;
  GroupCompare(FingerprintGroup::kModel)
      .field("fingerprint", a.model.fingerprint.hex(), b.model.fingerprint.hex())
      .field("architecture", a.model.architecture, b.model.architecture)
      .field("weight_dtype", a.model.weight_dtype, b.model.weight_dtype)
      .add_to(out);
  GroupCompare(FingerprintGroup::kTokenizer)
      .field("hash", a.tokenizer_hash.hex(), b.tokenizer_hash.hex())
      .add_to(out);
  const auto& ra = a.request;
  const auto& rb = b.request;
  GroupCompare prompt(FingerprintGroup::kPrompt);
  prompt.num("prompt_length", ra.prompt_length, rb.prompt_length)
      .field("prompt_hash", hex64(ra.prompt_hash), hex64(rb.prompt_hash));
  if (ra.prompt_hash != rb.prompt_hash && ra.prompt_tokens && rb.prompt_tokens) {
    prompt.field("prompt_tokens", token_list_text(ra.prompt_tokens),
                 token_list_text(rb.prompt_tokens));
  }
  prompt.add_to(out);
  GroupCompare(FingerprintGroup::kConfig)
      .object("", fingerprint::config_to_json(ra.config), fingerprint::config_to_json(rb.config))
      .add_to(out);
  GroupCompare(FingerprintGroup::kSeed).num("seed", ra.seed, rb.seed).add_to(out);
  const auto& na = a.numerics;
  const auto& nb = b.numerics;
  GroupCompare(FingerprintGroup::kNumerics)
      .field("mode", na.mode, nb.mode)
      .num("spec_version", na.spec_version, nb.spec_version)
      .field("kernel_isa", na.kernel_isa, nb.kernel_isa)
      .num("threads", na.threads, nb.threads)
      .field("device", na.device, nb.device)
      .field("kv_dtype", na.kv_dtype, nb.kv_dtype)
      .field("weight_format", na.weight_format, nb.weight_format)
      .add_to(out);
  const auto& la = a.library;
  const auto& lb = b.library;
  GroupCompare(FingerprintGroup::kLibrary)
      .field("version", la.version, lb.version)
      .field("git_revision", la.git_revision, lb.git_revision)
      .field("compiler", la.compiler, lb.compiler)
      .field("build_type", la.build_type, lb.build_type)
      .field("build_flags", la.build_flags, lb.build_flags)
      .add_to(out);
  auto gpu_text = [](const std::optional<FingerprintGpu>& g) {
    return g ? g->name + " (sm " + g->compute_capability + ", driver " + g->driver + ")"
             : std::string("(none)");
  };
  GroupCompare(FingerprintGroup::kDevice)
      .field("cpu_model", a.device.cpu_model, b.device.cpu_model)
      .field("cpu_flags", join(a.device.cpu_flags), join(b.device.cpu_flags))
      .num("hardware_threads", a.device.hardware_threads, b.device.hardware_threads)
      .field("gpu", gpu_text(a.device.gpu), gpu_text(b.device.gpu))
      .add_to(out);
  const auto& ea = a.environment;
  const auto& eb = b.environment;
  GroupCompare(FingerprintGroup::kEnvironment)
      .field("os", ea.os, eb.os)
      .field("glibc_version", ea.glibc_version, eb.glibc_version)
      .field("libtorch_version", ea.libtorch_version, eb.libtorch_version)
      .object("env.", json(ea.env_vars), json(eb.env_vars))
      .add_to(out);
  return out;
}

// The first divergence within one sequence pair, if any.
std::optional<StepDivergence> sequence_divergence(const RunFingerprint& a, const RunFingerprint& b,
                                                  std::size_t index) {
  const FingerprintSequence& sa = a.sequences[index];
  const FingerprintSequence& sb = b.sequences[index];
  const std::size_t na = sa.tokens.size();
  const std::size_t nb = sb.tokens.size();
  for (std::size_t t = 0; t < std::max(na, nb); ++t) {
    StepDivergence d;
    d.sequence = static_cast<std::int64_t>(index);
    d.step = static_cast<std::int64_t>(t);
    if (t < na) d.token_a = sa.tokens[t];
    if (t < nb) d.token_b = sb.tokens[t];
    if (t < sa.step_digests.size()) d.digest_a = sa.step_digests[t];
    if (t < sb.step_digests.size()) d.digest_b = sb.step_digests[t];
    if (t >= na || t >= nb) {
      d.reason = std::string("sequence ") + (t >= na ? "a" : "b") + " ended (" +
                 to_string(t >= na ? sa.finish_reason : sb.finish_reason) + ")";
    } else if (d.digest_a && d.digest_b && *d.digest_a != *d.digest_b) {
      d.reason = "step digest differs";
    } else if (*d.token_a != *d.token_b) {
      d.reason = "token differs";
    } else {
      continue;
    }
    if (t < sa.logits.size() && t < sb.logits.size()) {
      d.top_a = top_logits(sa.logits[t], 5);
      d.top_b = top_logits(sb.logits[t], 5);
    }
    return d;
  }
  if (sa.chain_digest != sb.chain_digest) {
    StepDivergence d;
    d.sequence = static_cast<std::int64_t>(index);
    d.step = -1;
    d.reason = "chain digests differ while tokens agree; record per-step digests to locate";
    return d;
  }
  if (sa.finish_reason != sb.finish_reason) {
    StepDivergence d;
    d.sequence = static_cast<std::int64_t>(index);
    d.step = static_cast<std::int64_t>(na);
    d.reason = std::string("finish reason differs: ") + to_string(sa.finish_reason) + " vs " +
               to_string(sb.finish_reason);
    return d;
  }
  return std::nullopt;
}
}  // namespace

std::vector<TokenLogit> top_logits(const std::vector<float>& row, std::size_t k) {
  std::vector<TokenLogit> all;
  all.reserve(row.size());
  for (std::size_t i = 0; i < row.size(); ++i) {
    all.push_back({static_cast<std::int32_t>(i), row[i]});
  }
  auto before = [](const TokenLogit& x, const TokenLogit& y) {
    const bool nx = std::isnan(x.logit), ny = std::isnan(y.logit);
    if (nx != ny) return ny;  // numbers before NaNs
    if (!nx && x.logit != y.logit) return x.logit > y.logit;
    return x.token < y.token;
  };
  k = std::min(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(), before);
  all.resize(k);
  return all;
}

bool same_output(const RunFingerprint& a, const RunFingerprint& b) {
  if (a.sequences.size() != b.sequences.size()) return false;
  for (std::size_t i = 0; i < a.sequences.size(); ++i) {
    if (sequence_divergence(a, b, i)) return false;
  }
  return true;
}

FingerprintDiff diff(const RunFingerprint& a, const RunFingerprint& b) {
  FingerprintDiff d;
  d.groups = compare_groups(a, b);
  const std::size_t common = std::min(a.sequences.size(), b.sequences.size());
  for (std::size_t i = 0; i < common; ++i) {
    auto div = sequence_divergence(a, b, i);
    if (!div) continue;
    d.outputs_identical = false;
    // Prefer the earliest located step; an unlocated one (-1) only when nothing else.
    auto rank = [](std::int64_t s) { return s < 0 ? INT64_MAX : s; };
    if (!d.divergence || rank(div->step) < rank(d.divergence->step)) d.divergence = std::move(div);
  }
  if (a.sequences.size() != b.sequences.size()) {
    d.outputs_identical = false;
    d.output_note = "sequence count differs: " + std::to_string(a.sequences.size()) + " vs " +
                    std::to_string(b.sequences.size());
  }
  return d;
}

bool FingerprintDiff::reproduced() const {
  if (!outputs_identical) return false;
  for (const auto& g : groups) {
    if (is_input_group(g.group)) return false;
  }
  return true;
}

bool FingerprintDiff::differs(FingerprintGroup g) const {
  for (const auto& x : groups) {
    if (x.group == g) return true;
  }
  return false;
}

namespace {
std::string opt_token(const std::optional<std::int32_t>& t) {
  return t ? std::to_string(*t) : std::string("(none)");
}

std::string top_text(const std::vector<TokenLogit>& top) {
  std::ostringstream os;
  for (const auto& t : top) os << " " << t.token << ":" << t.logit;
  return os.str();
}

json top_json(const std::vector<TokenLogit>& top) {
  json a = json::array();
  for (const auto& t : top) a.push_back({{"token", t.token}, {"logit", t.logit}});
  return a;
}
}  // namespace

std::string FingerprintDiff::to_text() const {
  std::ostringstream os;
  if (identical()) {
    os << "identical\n";
    return os.str();
  }
  os << (reproduced() ? "reproduced (same request, same output; run context differs)\n"
                      : "different\n");
  for (const auto& g : groups) {
    os << "group " << to_string(g.group) << " differs"
       << (is_input_group(g.group) ? "" : " (run context)") << ":\n";
    for (const auto& f : g.fields) os << "  " << f << "\n";
  }
  if (outputs_identical) {
    os << "outputs: identical\n";
  } else {
    os << "outputs: differ\n";
    if (!output_note.empty()) os << "  " << output_note << "\n";
    if (divergence) {
      const auto& v = *divergence;
      os << "  first divergence: sequence " << v.sequence;
      if (v.step >= 0) os << ", step " << v.step;
      os << ": " << v.reason << "\n";
      if (v.step >= 0) {
        os << "  token a=" << opt_token(v.token_a) << " b=" << opt_token(v.token_b) << "\n";
      }
      if (v.digest_a || v.digest_b) {
        os << "  step digest a=" << (v.digest_a ? hex64(*v.digest_a) : "(none)")
           << " b=" << (v.digest_b ? hex64(*v.digest_b) : "(none)") << "\n";
      }
      if (!v.top_a.empty()) os << "  top-5 a:" << top_text(v.top_a) << "\n";
      if (!v.top_b.empty()) os << "  top-5 b:" << top_text(v.top_b) << "\n";
    }
  }
  return os.str();
}

std::string FingerprintDiff::to_json(int indent) const {
  json j;
  j["identical"] = identical();
  j["reproduced"] = reproduced();
  json groups_json = json::array();
  for (const auto& g : groups) {
    groups_json.push_back(
        {{"group", to_string(g.group)}, {"input", is_input_group(g.group)}, {"fields", g.fields}});
  }
  j["groups"] = std::move(groups_json);
  j["outputs_identical"] = outputs_identical;
  if (!output_note.empty()) j["output_note"] = output_note;
  if (divergence) {
    const auto& v = *divergence;
    json dj = {{"sequence", v.sequence}, {"step", v.step}, {"reason", v.reason}};
    dj["token_a"] = v.token_a ? json(*v.token_a) : json(nullptr);
    dj["token_b"] = v.token_b ? json(*v.token_b) : json(nullptr);
    dj["step_digest_a"] = v.digest_a ? json(hex64(*v.digest_a)) : json(nullptr);
    dj["step_digest_b"] = v.digest_b ? json(hex64(*v.digest_b)) : json(nullptr);
    if (!v.top_a.empty()) dj["top_a"] = top_json(v.top_a);
    if (!v.top_b.empty()) dj["top_b"] = top_json(v.top_b);
    j["divergence"] = std::move(dj);
  }
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace detinfer
