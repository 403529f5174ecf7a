#include "cache/result_codec.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/generation_fields.h"

namespace detinfer::cache {

namespace {
constexpr std::uint32_t kResultFormatVersion = 1;
// 2: every field of the table (core/generation_fields.h) as key + value; version 1
// omitted first_sample_index, so a request differing only in it was served another's result.
constexpr std::uint32_t kConfigFormatVersion = 2;

class Writer {
 public:
  explicit Writer(Bytes* out) : out_(out) {}
  void u8(std::uint8_t v) { out_->push_back(v); }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out_->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void i32(std::int32_t v) { u32(static_cast<std::uint32_t>(v)); }
  void f32(float v) {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    u32(b);
  }
  void f64(double v) {
    std::uint64_t b;
    std::memcpy(&b, &v, 8);
    u64(b);
  }
  void str(std::string_view s) {
    u64(s.size());
    out_->insert(out_->end(), s.begin(), s.end());
  }
  void ids(const std::vector<std::int32_t>& v) {
    u64(v.size());
    for (std::int32_t x : v) i32(x);
  }

 private:
  Bytes* out_;
};

class Reader {
 public:
  explicit Reader(const Bytes& in) : in_(in) {}
  std::uint8_t u8() { return *take(1); }
  std::uint32_t u32() {
    const std::uint8_t* p = take(4);
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
    return v;
  }
  std::uint64_t u64() {
    const std::uint8_t* p = take(8);
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
    return v;
  }
  std::int32_t i32() { return static_cast<std::int32_t>(u32()); }
  float f32() {
    const std::uint32_t b = u32();
    float v;
    std::memcpy(&v, &b, 4);
    return v;
  }
  double f64() {
    const std::uint64_t b = u64();
    double v;
    std::memcpy(&v, &b, 8);
    return v;
  }
  // A count of elements of at least `min_bytes` each, bounded by the bytes left.
  std::size_t count(std::size_t min_bytes) {
    const std::uint64_t n = u64();
    if (n > (in_.size() - pos_) / min_bytes) {
      fail(ErrorCode::kCorrupt, "result cache entry: count ", n, " exceeds the ", in_.size() - pos_,
           " bytes left at offset ", pos_);
    }
    return static_cast<std::size_t>(n);
  }
  std::string str() {
    const std::size_t n = count(1);
    const std::uint8_t* p = take(n);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  std::vector<std::int32_t> ids() {
    std::vector<std::int32_t> v(count(4));
    for (auto& x : v) x = i32();
    return v;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  const std::uint8_t* take(std::size_t n) {
    if (n > in_.size() - pos_) {
      fail(ErrorCode::kCorrupt, "result cache entry: truncated at offset ", pos_, " (need ", n,
           " more bytes, have ", in_.size() - pos_, ")");
    }
    const std::uint8_t* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }

  const Bytes& in_;
  std::size_t pos_ = 0;
};

float canonical_zero(float v) { return v == 0.0f ? 0.0f : v; }

// Stop ids and stop strings are sets.
template <typename T>
std::vector<T> sorted_unique(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
}  // namespace

namespace {
// Writes each field as its key then its value, so that no two configs share bytes.
struct WriteField {
  Writer& w;

  template <typename T>
  void operator()(const core::FieldSpec& f, const T& v) const {
    if (!f.affects_output) return;
    w.str(f.key);
    if constexpr (std::is_same_v<T, bool>) {
      w.u8(v ? 1 : 0);
    } else if constexpr (std::is_same_v<T, float>) {
      w.f32(canonical_zero(v));
    } else if constexpr (std::is_same_v<T, std::int32_t>) {
      w.i32(v);
    } else if constexpr (std::is_same_v<T, std::uint32_t>) {
      w.u32(v);
    } else if constexpr (std::is_same_v<T, std::optional<std::uint64_t>>) {
      w.u64(*v);  // resolved by the caller
    } else if constexpr (std::is_same_v<T, std::optional<std::vector<std::int32_t>>>) {
      w.u8(v ? 1 : 0);
      if (v) w.ids(sorted_unique(*v));
    } else if constexpr (std::is_same_v<T, ResponseFormat>) {
      w.u8(static_cast<std::uint8_t>(v.type));
      w.str(v.json_schema);
    } else {
      static_assert(std::is_same_v<T, std::vector<std::string>>, "a new kind of field");
      const std::vector<std::string> set = sorted_unique(v);
      w.u64(set.size());
      for (const auto& s : set) w.str(s);
    }
  }
};
}  // namespace

std::string canonical_generation_config(const GenerationConfig& c) {
  if (!c.seed) {
    fail(ErrorCode::kInvalidArgument,
         "result cache: GenerationConfig.seed must be resolved before computing the key");
  }
  Bytes b;
  Writer w(&b);
  w.u32(kConfigFormatVersion);
  core::for_each_field(c, WriteField{w});
  return std::string(b.begin(), b.end());
}

namespace {
// A token and its logprob: the chosen one of a step, or one of its top alternatives.
void write_logprob(Writer& w, std::int32_t token, float logprob) {
  w.i32(token);
  w.f32(logprob);
}
void read_logprob(Reader& r, std::int32_t& token, float& logprob) {
  token = r.i32();
  logprob = r.f32();
}
}  // namespace

Bytes serialize_result(const GenerationResult& r) {
  Bytes b;
  Writer w(&b);
  w.u32(kResultFormatVersion);
  w.ids(r.prompt_tokens);
  w.u64(r.seed);
  w.u64(r.sequences.size());
  for (const Sequence& s : r.sequences) {
    w.ids(s.tokens);
    w.str(s.text);
    w.u8(static_cast<std::uint8_t>(s.finish_reason));
    w.u64(s.logprobs.size());
    for (const StepLogprobs& step : s.logprobs) {
      write_logprob(w, step.token, step.logprob);
      w.u64(step.top.size());
      for (const TokenLogprob& t : step.top) write_logprob(w, t.token, t.logprob);
    }
    w.f64(s.score);
    w.u64(s.digest);
    w.u64(s.step_digests.size());
    for (std::uint64_t d : s.step_digests) w.u64(d);
  }
  return b;
}

GenerationResult deserialize_result(const Bytes& bytes) {
  Reader r(bytes);
  const std::uint32_t version = r.u32();
  if (version != kResultFormatVersion) {
    fail(ErrorCode::kCorrupt, "result cache entry: format version ", version, ", expected ",
         kResultFormatVersion);
  }
  GenerationResult out;
  out.prompt_tokens = r.ids();
  out.seed = r.u64();
  out.sequences.resize(r.count(8));
  for (Sequence& s : out.sequences) {
    s.tokens = r.ids();
    s.text = r.str();
    const std::uint8_t reason = r.u8();
    if (reason > static_cast<std::uint8_t>(FinishReason::kCancelled)) {
      fail(ErrorCode::kCorrupt, "result cache entry: finish reason ", int{reason});
    }
    s.finish_reason = static_cast<FinishReason>(reason);
    s.logprobs.resize(r.count(16));
    for (StepLogprobs& step : s.logprobs) {
      read_logprob(r, step.token, step.logprob);
      step.top.resize(r.count(8));
      for (TokenLogprob& t : step.top) read_logprob(r, t.token, t.logprob);
    }
    s.score = r.f64();
    s.digest = r.u64();
    s.step_digests.resize(r.count(8));
    for (auto& d : s.step_digests) d = r.u64();
  }
  if (!r.done()) fail(ErrorCode::kCorrupt, "result cache entry: trailing bytes");
  return out;
}

ResultComparison compare_results(const GenerationResult& a, const GenerationResult& b) {
  auto differ = [](std::string what) { return ResultComparison{false, std::move(what)}; };
  if (a.seed != b.seed) return differ(str_cat("seed ", a.seed, " vs ", b.seed));
  if (a.prompt_tokens != b.prompt_tokens) return differ("prompt tokens differ");
  if (a.sequences.size() != b.sequences.size()) {
    return differ(str_cat("sequence count ", a.sequences.size(), " vs ", b.sequences.size()));
  }
  for (std::size_t i = 0; i < a.sequences.size(); ++i) {
    const Sequence& x = a.sequences[i];
    const Sequence& y = b.sequences[i];
    const std::string at = str_cat("sequence ", i, ": ");
    if (x.tokens != y.tokens) {
      std::size_t t = 0;
      while (t < x.tokens.size() && t < y.tokens.size() && x.tokens[t] == y.tokens[t]) ++t;
      return differ(str_cat(at, "tokens differ from position ", t));
    }
    if (x.text != y.text) return differ(at + "text differs");
    if (x.finish_reason != y.finish_reason) return differ(at + "finish reason differs");
    if (x.logprobs.size() != y.logprobs.size()) return differ(at + "logprob step count differs");
    for (std::size_t s = 0; s < x.logprobs.size(); ++s) {
      const StepLogprobs& p = x.logprobs[s];
      const StepLogprobs& q = y.logprobs[s];
      bool same =
          p.token == q.token && same_bits(p.logprob, q.logprob) && p.top.size() == q.top.size();
      for (std::size_t k = 0; same && k < p.top.size(); ++k) {
        same = p.top[k].token == q.top[k].token && same_bits(p.top[k].logprob, q.top[k].logprob);
      }
      if (!same) return differ(str_cat(at, "logprobs of step ", s, " differ"));
    }
    if (!same_bits(x.score, y.score)) return differ(at + "score differs");
    if (x.step_digests != y.step_digests) {
      std::size_t s = 0;
      while (s < x.step_digests.size() && s < y.step_digests.size() &&
             x.step_digests[s] == y.step_digests[s]) {
        ++s;
      }
      return differ(str_cat(at, "logits digest differs from step ", s));
    }
    if (x.digest != y.digest) return differ(at + "run digest differs");
  }
  return {};
}

}  // namespace detinfer::cache
