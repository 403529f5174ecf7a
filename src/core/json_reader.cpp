#include "core/json_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_set>
#include <vector>

#include "core/check.h"

namespace detinfer::core {
namespace {

using nlohmann::json;

[[noreturn]] void reject(ErrorCode code, std::string_view what, const std::string& reason) {
  throw Error(code, str_cat(what, ": not valid JSON: ", reason), std::string(what));
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
  std::int64_t depth = 0;
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
      if (++depth > limits.max_depth) {
        reject(code, what, str_cat("nested deeper than ", limits.max_depth, " levels at byte ", i));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
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

}  // namespace

json parse_json(std::string_view text, const JsonLimits& limits, ErrorCode code,
                std::string_view what) {
  prescan(text, limits, code, what);
  // Duplicate keys would otherwise be resolved silently (the last one wins). nlohmann's
  // parser is iterative; this callback sees every key with the depth of its object.
  std::vector<std::unordered_set<std::string>> keys;  // one set per open object
  const json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= limits.max_depth) {  // the pre-scan already guarantees this
          reject(code, what, str_cat("nested deeper than ", limits.max_depth, " levels"));
        }
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (limits.reject_duplicate_keys && !keys.empty() &&
            !keys.back().insert(parsed.get<std::string>()).second) {
          reject(code, what, str_cat("duplicate key \"", parsed.get<std::string>(), "\""));
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
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
