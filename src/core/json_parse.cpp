#include "core/json_parse.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "core/check.h"

namespace detinfer::core {
namespace {

using nlohmann::json;

[[noreturn]] void reject(ErrorCode code, std::string_view what, const std::string& reason) {
  throw Error(code, str_cat(what, ": not valid JSON: ", reason), std::string(what));
}

// Where the nesting of `text` first exceeds `max_depth` (text.size() when it never does),
// in one pass; the deepest level reached up to there is stored in `deepest`.
std::size_t scan_depth(std::string_view text, std::int64_t max_depth, std::int64_t& deepest) {
  std::int64_t depth = 0;
  deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return text.size();
}

// Size, NUL bytes and nesting depth, in one iterative pass: no input can make the parser,
// the value's copy/dump or any later walk over the value recurse deeper than max_depth.
void prescan(std::string_view text, const JsonLimits& limits, ErrorCode code,
             std::string_view what) {
  if (text.size() > limits.max_bytes) {
    reject(code, what,
           str_cat("the text is ", text.size(), " bytes, over the limit of ", limits.max_bytes,
                   " bytes"));
  }
  const std::size_t nul = text.find('\0');
  if (nul != std::string_view::npos) reject(code, what, str_cat("NUL byte at byte ", nul));
  std::int64_t deepest = 0;
  const std::size_t at = scan_depth(text, limits.max_depth, deepest);
  if (deepest > limits.max_depth) {
    reject(code, what, str_cat("nested deeper than ", limits.max_depth, " levels at byte ", at));
  }
}

// nlohmann's messages quote the input ("last read: '...'"): keep the Error's message ASCII
// so that it can itself be sent as JSON.
std::string ascii_only(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x80) {
      out.push_back(c);
    } else {
      out += "\\x";
      out.push_back(kHex[b >> 4]);
      out.push_back(kHex[b & 15]);
    }
  }
  return out;
}

// Builds the value from nlohmann's SAX events with the depth and duplicate-key checks.
// (nlohmann's callback parser scans the parent container at every object end, which makes
// an array of n objects cost O(n^2): 50,000 "{}" took 2.5 s. This builder is linear, also
// for ordered_json, whose operator[] searches the object: a key checked unique by the
// duplicate set is appended.)
template <typename Json>
class CheckedBuilder final : public nlohmann::json_sax<Json> {
 public:
  using Base = nlohmann::json_sax<Json>;
  CheckedBuilder(Json& root, const JsonLimits& limits, ErrorCode code, std::string_view what)
      : root_(root), limits_(limits), code_(code), what_(what) {}

  bool null() override { return put(nullptr) != nullptr; }
  bool boolean(bool v) override { return put(v) != nullptr; }
  bool number_integer(typename Base::number_integer_t v) override { return put(v) != nullptr; }
  bool number_unsigned(typename Base::number_unsigned_t v) override { return put(v) != nullptr; }
  bool number_float(typename Base::number_float_t v, const typename Base::string_t&) override {
    return put(v) != nullptr;
  }
  bool string(typename Base::string_t& v) override { return put(std::move(v)) != nullptr; }
  bool binary(typename Base::binary_t& v) override {
    return put(Json::binary(std::move(v))) != nullptr;
  }
  bool start_object(std::size_t) override { return open(nlohmann::detail::value_t::object); }
  bool start_array(std::size_t) override { return open(nlohmann::detail::value_t::array); }
  bool end_object() override {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }
  bool end_array() override {
    stack_.pop_back();
    return true;
  }
  bool key(typename Base::string_t& k) override {
    if (!limits_.reject_duplicate_keys) {
      element_ = &(*stack_.back())[k];
      return true;
    }
    if (!keys_.back().insert(k).second) {
      reject(code_, what_, str_cat("duplicate key \"", k, "\""));
    }
    auto& object = stack_.back()->template get_ref<typename Json::object_t&>();
    if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) {
      // ordered_map is a vector of pairs: append (its operator[] would search).
      using Pairs = typename Json::object_t::Container;
      element_ = &static_cast<Pairs&>(object).emplace_back(std::move(k), Json()).second;
    } else {
      element_ = &object.emplace(std::move(k), Json()).first->second;
    }
    return true;
  }
  // Rethrows nlohmann's exception as its own type, for parse_json's handlers.
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    if (const auto* p = dynamic_cast<const json::parse_error*>(&e)) throw *p;
    if (const auto* r = dynamic_cast<const json::out_of_range*>(&e)) throw *r;
    reject(code_, what_, ascii_only(e.what()));
  }

 private:
  // Places a value: the root, the next element of the open array, or the open key's value.
  template <typename T>
  Json* put(T&& v) {
    if (stack_.empty()) {
      root_ = Json(std::forward<T>(v));
      return &root_;
    }
    Json& top = *stack_.back();
    if (top.is_array()) {
      top.emplace_back(std::forward<T>(v));
      return &top.back();
    }
    *element_ = Json(std::forward<T>(v));
    return element_;
  }
  bool open(nlohmann::detail::value_t type) {
    // The pre-scan already guarantees this; kept so the builder is safe on its own.
    if (static_cast<std::int64_t>(stack_.size()) >= limits_.max_depth) {
      reject(code_, what_, str_cat("nested deeper than ", limits_.max_depth, " levels"));
    }
    stack_.push_back(put(type));
    if (type == nlohmann::detail::value_t::object) keys_.emplace_back();
    return true;
  }

  Json& root_;
  const JsonLimits& limits_;
  ErrorCode code_;
  std::string_view what_;
  std::vector<Json*> stack_;                           // the open arrays and objects
  std::vector<std::unordered_set<std::string>> keys_;  // one set per open object
  Json* element_ = nullptr;                            // the open key's value
};

// parse_json for either JSON type: the pre-scan, then the checked builder.
template <typename Json>
Json parse_checked(std::string_view text, const JsonLimits& limits, ErrorCode code,
                   std::string_view what) {
  prescan(text, limits, code, what);
  try {
    Json root;
    CheckedBuilder<Json> builder(root, limits, code, what);
    Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json,
                    /*strict=*/true, /*ignore_comments=*/false);
    return root;
  } catch (const json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 3: ...".
    std::string reason = e.what();
    const auto after = reason.find(": ", reason.find("parse error"));
    if (after != std::string::npos) reason = reason.substr(after + 2);
    // e.byte counts the characters read, so the offending byte is e.byte - 1.
    reject(code, what, str_cat(ascii_only(reason), " at byte ", e.byte > 0 ? e.byte - 1 : 0));
  } catch (const json::out_of_range& e) {
    // 406: a number that overflows a double ("1e400").
    std::string reason = e.what();
    const auto bracket = reason.find("] ");
    if (bracket != std::string::npos) reason = reason.substr(bracket + 2);
    reject(code, what, ascii_only(reason));
  } catch (const json::exception& e) {
    reject(code, what, ascii_only(e.what()));
  }
}

}  // namespace

std::int64_t json_nesting_depth(std::string_view text, std::int64_t stop_above) {
  std::int64_t deepest = 0;
  scan_depth(text, stop_above, deepest);
  return deepest;
}

json parse_json(std::string_view text, const JsonLimits& limits, ErrorCode code,
                std::string_view what) {
  return parse_checked<json>(text, limits, code, what);
}

nlohmann::ordered_json parse_json_ordered(std::string_view text, const JsonLimits& limits,
                                          ErrorCode code, std::string_view what) {
  return parse_checked<nlohmann::ordered_json>(text, limits, code, what);
}

std::string read_file_bounded(const std::string& path, std::size_t max_bytes,
                              std::string_view what) {
  const std::string field(what);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw Error(ErrorCode::kNotFound,
                str_cat(what, ": cannot open ", path, ": ", std::strerror(errno)), field);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    throw Error(ErrorCode::kNotFound, str_cat(what, ": ", path, " is a directory"), field);
  }
  const auto too_big = [&] {
    throw Error(ErrorCode::kCorrupt,
                str_cat(what, ": ", path, " is larger than the limit of ", max_bytes, " bytes"),
                field);
  };
  if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > max_bytes) too_big();
  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorCode::kNotFound,
                  str_cat(what, ": cannot read ", path, ": ", std::strerror(errno)), field);
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) too_big();
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

}  // namespace detinfer::core
