#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace detinfer::tokenizer {

namespace {
const char kReplacementChar[] = "\xEF\xBF\xBD";

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps)
      : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& s : steps_) s->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

// Bytes of every token (a token with a character outside the byte alphabet is taken as
// its own UTF-8 bytes), then one lossy UTF-8 string.
class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      const std::size_t start = bytes.size();
      bool ok = true;
      for (std::size_t i = 0; i < t.size() && ok;) {
        const std::size_t n = utf8_sequence_length(t, i);
        const int b = n == 0 ? -1 : code_point_to_byte(utf8_decode_at(t, i, n));
        if (b < 0) {
          ok = false;
        } else {
          bytes.push_back(static_cast<char>(b));
          i += n;
        }
      }
      if (!ok) {
        bytes.resize(start);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(const Pattern& p, std::string content, const std::string& where)
      : re_(p.text, !p.is_regex, where), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) t = regex_replace_all(re_, t, content_);
  }

 private:
  Regex re_;
  std::string content_;
};

// Rust's u8::from_str_radix(s, 16) for the two characters of <0xNN>.
int parse_hex_byte(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  const auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (t[3] == '+') return hex(t[4]);
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    const auto flush = [&] {
      if (pending.empty()) return;
      if (find_invalid_utf8(pending) == std::string::npos) {
        out.push_back(pending);
      } else {
        for (std::size_t i = 0; i < pending.size(); ++i) out.emplace_back(kReplacementChar);
      }
      pending.clear();
    };
    for (auto& t : tokens) {
      const int b = parse_hex_byte(t);
      if (b >= 0) {
        pending.push_back(static_cast<char>(b));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character per token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, std::size_t start, std::size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::size_t b = 0, e = t.size();
      for (std::size_t k = 0;
           k < start_ && t.compare(b, content_.size(), content_) == 0 && b + content_.size() <= e;
           ++k) {
        b += content_.size();
      }
      for (std::size_t k = 0; k < stop_ && e >= b + content_.size() &&
                              t.compare(e - content_.size(), content_.size(), content_) == 0;
           ++k) {
        e -= content_.size();
      }
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  std::size_t start_, stop_;
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : rep_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (std::size_t p = 0; p < t.size();) {
        if (!rep_.empty() && t.compare(p, rep_.size(), rep_) == 0) {
          // Hugging Face drops every replacement character of the first token.
          if (!(i == 0 && strip_first_)) out.push_back(' ');
          p += rep_.size();
        } else {
          out.push_back(t[p++]);
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string rep_;
  bool strip_first_;
};

std::string single_char(const Json& j, const char* key, const std::string& where) {
  const std::string s = get_string(j, key, where);
  const std::size_t n = s.empty() ? 0 : utf8_sequence_length(s, 0);
  if (n == 0 || n != s.size())
    fail(ErrorCode::kCorrupt, where, ".", key, ": expected one character");
  return s;
}
}  // namespace

bool has_byte_fallback(const Json& j) {
  if (!j.is_object()) return false;
  if (j.value("type", "") == "ByteFallback") return true;
  const auto it = j.find("decoders");
  if (it == j.end() || !it->is_array()) return false;
  for (const Json& d : *it) {
    if (has_byte_fallback(d)) return true;
  }
  return false;
}

bool is_byte_fallback_token(const std::string& token) { return parse_hex_byte(token) >= 0; }

std::unique_ptr<Decoder> make_decoder(const Json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, where);
  if (type == "Sequence") {
    return std::make_unique<SequenceDecoder>(sequence_steps(j, "decoders", where, make_decoder));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(get_pattern(j, where), get_string(j, "content", where),
                                            where);
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    const std::int64_t start = get_int(j, "start", where), stop = get_int(j, "stop", where);
    if (start < 0 || stop < 0) fail(ErrorCode::kCorrupt, where, ": start and stop must be >= 0");
    return std::make_unique<StripDecoder>(single_char(j, "content", where),
                                          static_cast<std::size_t>(start),
                                          static_cast<std::size_t>(stop));
  }
  if (type == "Metaspace") {
    const std::string scheme = get_optional_string(j, "prepend_scheme", where);
    const bool strip_first =
        scheme.empty() ? get_bool(j, "add_prefix_space", true, where) : scheme != "never";
    return std::make_unique<MetaspaceDecoder>(single_char(j, "replacement", where), strip_first);
  }
  unsupported(where, "decoder '" + type + "'");
}

}  // namespace detinfer::tokenizer
