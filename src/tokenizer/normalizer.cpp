#include "tokenizer/normalizer.h"

#include <vector>

#include "tokenizer/nfc.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode_props.h"

namespace detinfer::tokenizer {

namespace {
class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  void apply(std::string& text) const override {
    for (const auto& s : steps_) s->apply(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void apply(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(const Pattern& p, std::string content, const std::string& where)
      : regex_(p.text, !p.is_regex, where), content_(std::move(content)) {}
  void apply(std::string& text) const override { text = regex_replace_all(regex_, text, content_); }

 private:
  Regex regex_;
  std::string content_;
};

class NfcNormalizer final : public Normalizer {
 public:
  void apply(std::string& text) const override { text = nfc(text); }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void apply(std::string& text) const override {
    std::size_t b = 0, e = text.size();
    if (left_) b = leading_whitespace_bytes(text);
    if (right_) e = b + trailing_whitespace_start(std::string_view(text).substr(b));
    text = text.substr(b, e - b);
  }

 private:
  bool left_, right_;
};
}  // namespace

std::string regex_replace_all(const Regex& re, std::string_view text, std::string_view content) {
  std::vector<std::pair<std::size_t, std::size_t>> m;
  re.find_all(text, m);
  if (m.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  std::size_t prev = 0;
  for (const auto& [b, e] : m) {
    out.append(text.substr(prev, b - prev));
    out.append(content);
    prev = e;
  }
  out.append(text.substr(prev));
  return out;
}

std::unique_ptr<Normalizer> make_normalizer(const Json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, where);
  if (type == "Sequence") {
    return std::make_unique<SequenceNormalizer>(
        sequence_steps(j, "normalizers", where, make_normalizer));
  }
  if (type == "Prepend")
    return std::make_unique<PrependNormalizer>(get_string(j, "prepend", where));
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(get_pattern(j, where),
                                               get_string(j, "content", where), where);
  }
  if (type == "NFC") return std::make_unique<NfcNormalizer>();
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(get_bool(j, "strip_left", false, where),
                                             get_bool(j, "strip_right", false, where));
  }
  unsupported(where, "normalizer '" + type + "'");
}

}  // namespace detinfer::tokenizer
