#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"

namespace detinfer::tokenizer {

namespace {
using Match = std::pair<std::size_t, std::size_t>;

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const std::string& s, const std::string& where) {
  if (s == "Removed") return Behavior::kRemoved;
  if (s == "Isolated") return Behavior::kIsolated;
  if (s == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::kMergedWithNext;
  if (s == "Contiguous") return Behavior::kContiguous;
  fail(ErrorCode::kCorrupt, where, ".behavior: unknown split behavior '", s, "'");
}

// Hugging Face's NormalizedString::split: the pieces between and at the matches of `re`
// in one span, combined according to `behavior` (empty pieces are dropped).
void split_span(const Regex& re, Behavior behavior, bool invert, const Pieces& in,
                const Pieces::Span& span, std::vector<Match>& scratch,
                std::vector<Pieces::Span>& out) {
  const std::string_view text = in.text(span);
  scratch.clear();
  re.find_all(text, scratch);
  // (range, is_match) over the whole span, as Pattern::find_matches.
  struct Part {
    std::size_t b, e;
    bool m;
  };
  std::vector<Part> parts;
  parts.reserve(scratch.size() * 2 + 1);
  std::size_t prev = 0;
  for (const auto& [b, e] : scratch) {
    if (prev != b) parts.push_back({prev, b, false});
    parts.push_back({b, e, true});
    prev = e;
  }
  if (prev != text.size() || parts.empty()) parts.push_back({prev, text.size(), false});
  if (invert) {
    for (auto& p : parts) p.m = !p.m;
  }
  std::vector<Part> res;
  switch (behavior) {
    case Behavior::kIsolated:
      res = std::move(parts);
      break;
    case Behavior::kRemoved:
      for (const auto& p : parts) {
        if (!p.m) res.push_back(p);
      }
      break;
    case Behavior::kMergedWithPrevious: {
      bool prev_match = false;
      for (const auto& p : parts) {
        if (p.m && !prev_match && !res.empty()) {
          res.back().e = p.e;
        } else {
          res.push_back({p.b, p.e, p.m && !prev_match});
        }
        prev_match = p.m;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool prev_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->m && !prev_match && !res.empty()) {
          res.back().b = it->b;
        } else {
          res.push_back(*it);
        }
        prev_match = it->m;
      }
      std::reverse(res.begin(), res.end());
      break;
    }
    case Behavior::kContiguous: {
      int prev_m = -1;
      for (const auto& p : parts) {
        if (prev_m == static_cast<int>(p.m) && !res.empty()) {
          res.back().e = p.e;
        } else {
          res.push_back(p);
        }
        prev_m = p.m;
      }
      break;
    }
  }
  for (const auto& p : res) {
    if (p.e > p.b) {
      out.push_back({static_cast<std::uint32_t>(span.begin + p.b),
                     static_cast<std::uint32_t>(span.begin + p.e), span.at_start && p.b == 0});
    }
  }
}

void split_all(const Regex& re, Behavior behavior, bool invert, Pieces& pieces) {
  std::vector<Pieces::Span> out;
  out.reserve(pieces.spans.size() * 4);
  std::vector<Match> scratch;
  for (const auto& s : pieces.spans) split_span(re, behavior, invert, pieces, s, scratch, out);
  pieces.spans = std::move(out);
}

// Rewrites every span's text with fn(text, out, span); spans keep their order.
template <typename Fn>
void rewrite(Pieces& pieces, Fn fn) {
  std::string buf;
  buf.reserve(pieces.buf.size() + pieces.spans.size() * 3);
  for (auto& s : pieces.spans) {
    const auto b = static_cast<std::uint32_t>(buf.size());
    fn(pieces.text(s), buf, s);
    s.begin = b;
    s.end = static_cast<std::uint32_t>(buf.size());
  }
  pieces.buf = std::move(buf);
}

class SequencePre final : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void apply(Pieces& p) const override {
    for (const auto& s : steps_) s->apply(p);
  }
  bool keeps_every_byte() const override {
    return std::all_of(steps_.begin(), steps_.end(),
                       [](const auto& s) { return s->keeps_every_byte(); });
  }
  bool byte_level() const override {
    return std::any_of(steps_.begin(), steps_.end(), [](const auto& s) { return s->byte_level(); });
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

class SplitPre final : public PreTokenizer {
 public:
  SplitPre(const Pattern& p, Behavior b, bool invert, const std::string& where)
      : re_(p.text, !p.is_regex, where), behavior_(b), invert_(invert) {}
  void apply(Pieces& p) const override {
    p.materialize();
    split_all(re_, behavior_, invert_, p);
  }
  bool keeps_every_byte() const override { return behavior_ != Behavior::kRemoved; }

 private:
  Regex re_;
  Behavior behavior_;
  bool invert_;
};

// GPT-2's pattern, used by ByteLevel when use_regex is true.
const char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPre final : public PreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, bool use_regex, const std::string& where)
      : add_prefix_space_(add_prefix_space),
        re_(use_regex ? std::make_unique<Regex>(kGpt2Pattern, false, where) : nullptr) {}
  void apply(Pieces& p) const override {
    p.materialize();
    if (add_prefix_space_) {
      rewrite(p, [](std::string_view t, std::string& out, const Pieces::Span&) {
        if (t.empty() || t[0] != ' ') out.push_back(' ');
        out.append(t);
      });
    }
    if (re_) split_all(*re_, Behavior::kIsolated, false, p);
    p.byte_level_pending = true;
  }
  bool byte_level() const override { return true; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> re_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePre final : public PreTokenizer {
 public:
  MetaspacePre(std::string replacement, PrependScheme scheme, bool split, const std::string& where)
      : rep_(std::move(replacement)), scheme_(scheme), split_(split), re_(rep_, true, where) {}
  void apply(Pieces& p) const override {
    p.materialize();
    rewrite(p, [this](std::string_view t, std::string& out, const Pieces::Span& s) {
      const std::size_t start = out.size();
      for (const char c : t) {
        if (c == ' ') {
          out.append(rep_);
        } else {
          out.push_back(c);
        }
      }
      const bool starts = std::string_view(out).substr(start).rfind(rep_, 0) == 0;
      if (!starts &&
          (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && s.at_start))) {
        out.insert(start, rep_);
      }
    });
    if (split_) split_all(re_, Behavior::kMergedWithNext, false, p);
  }

 private:
  std::string rep_;
  PrependScheme scheme_;
  bool split_;
  Regex re_;
};

PrependScheme parse_prepend_scheme(const Json& j, const std::string& where) {
  const std::string s = get_optional_string(j, "prepend_scheme", where);
  if (s.empty()) {
    return get_bool(j, "add_prefix_space", true, where) ? PrependScheme::kAlways
                                                        : PrependScheme::kNever;
  }
  if (s == "always") return PrependScheme::kAlways;
  if (s == "first") return PrependScheme::kFirst;
  if (s == "never") return PrependScheme::kNever;
  fail(ErrorCode::kCorrupt, where, ".prepend_scheme: unknown value '", s, "'");
}
}  // namespace

void Pieces::materialize() {
  if (!byte_level_pending) return;
  byte_level_pending = false;
  rewrite(*this, [](std::string_view t, std::string& out, const Span&) {
    for (const char c : t) out += byte_to_char(static_cast<std::uint8_t>(c));
  });
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, where);
  if (type == "Sequence") {
    return std::make_unique<SequencePre>(
        sequence_steps(j, "pretokenizers", where, make_pre_tokenizer));
  }
  if (type == "Split") {
    return std::make_unique<SplitPre>(get_pattern(j, where),
                                      parse_behavior(get_string(j, "behavior", where), where),
                                      get_bool(j, "invert", false, where), where);
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPre>(get_bool(j, "add_prefix_space", true, where),
                                          get_bool(j, "use_regex", true, where), where);
  }
  if (type == "Metaspace") {
    const std::string rep = get_string(j, "replacement", where);
    return std::make_unique<MetaspacePre>(rep, parse_prepend_scheme(j, where),
                                          get_bool(j, "split", true, where), where);
  }
  if (type == "Digits") {
    const bool individual = get_bool(j, "individual_digits", false, where);
    const Pattern digits{individual ? R"(\p{N})" : R"(\p{N}+)", true};
    return std::make_unique<SplitPre>(digits, Behavior::kIsolated, false, where);
  }
  unsupported(where, "pre_tokenizer '" + type + "'");
}

}  // namespace detinfer::tokenizer
