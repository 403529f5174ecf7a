#include "http/request_parser.h"

#include <algorithm>
#include <cstring>

namespace detinfer_http {

namespace {

// RFC 9110 tchar: the characters of a token (method, header name).
bool is_tchar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != 0;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Does the comma-separated list `value` contain `token` (case-insensitive)?
bool has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    if (iequals(trim_ows(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

void RequestParser::fail(int status, std::string message) {
  state_ = State::kFailed;
  status_ = Status::kError;
  error_status_ = status;
  error_message_ = std::move(message);
}

void RequestParser::complete() {
  state_ = State::kDone;
  status_ = Status::kComplete;
}

Request RequestParser::take() {
  Request r = std::move(request_);
  const HttpLimits limits = limits_;
  *this = RequestParser(limits);
  return r;
}

std::size_t RequestParser::feed(std::string_view data) {
  std::size_t used = 0;
  while (used < data.size() && status_ == Status::kNeedMore) {
    const std::string_view rest = data.substr(used);
    switch (state_) {
      case State::kHead:
        used += feed_head(rest);
        break;
      case State::kBody: {
        const std::size_t n =
            static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, rest.size()));
        request_.body.append(rest.data(), n);
        remaining_ -= n;
        used += n;
        if (remaining_ == 0) complete();
        break;
      }
      default:
        used += feed_chunked(rest);
    }
  }
  return used;
}

std::size_t RequestParser::feed_head(std::string_view data) {
  std::size_t used = 0;
  // RFC 9112 2.2: empty lines before the request line are ignored.
  while (head_.empty() && used < data.size() && (data[used] == '\r' || data[used] == '\n')) {
    ++used;
  }
  if (used == data.size()) return used;
  started_ = true;
  const std::size_t room = limits_.max_header_bytes + 4 - head_.size();
  const std::size_t take = std::min(room, data.size() - used);
  const std::size_t scanned = head_.size();
  head_.append(data.data() + used, take);
  used += take;
  const std::size_t end = head_.find("\r\n\r\n", head_scan_);
  // Lines end with CRLF (RFC 9112 2.2): a bare LF in the head is refused at once
  // (docs/server.md), not left to wait for a blank line that never comes. Bytes after
  // the head are the body's and are not looked at.
  const std::size_t head_end = end == std::string::npos ? head_.size() : end + 4;
  for (std::size_t i = head_.find('\n', scanned); i < head_end; i = head_.find('\n', i + 1)) {
    if (i == 0 || head_[i - 1] != '\r') {
      fail(400, "bare LF in the request header (lines must end with CRLF)");
      return used;
    }
  }
  if (end == std::string::npos) {
    head_scan_ = head_.size() >= 3 ? head_.size() - 3 : 0;
    const std::size_t line_end = head_.find("\r\n");
    const std::size_t line_len = line_end == std::string::npos ? head_.size() : line_end;
    if (line_len > limits_.max_request_line) {
      fail(414, "request line longer than " + std::to_string(limits_.max_request_line) + " bytes");
    } else if (head_.size() > limits_.max_header_bytes) {
      fail(431,
           "request header larger than " + std::to_string(limits_.max_header_bytes) + " bytes");
    } else if (head_.find('\0') != std::string::npos) {
      fail(400, "NUL byte in the request header");
    }
    return used;
  }
  // Bytes after the blank line belong to the body (or the next request): give them back.
  const std::size_t head_len = end + 4;
  used -= head_.size() - head_len;
  head_.resize(head_len);
  if (head_len - 2 > limits_.max_header_bytes) {
    fail(431, "request header larger than " + std::to_string(limits_.max_header_bytes) + " bytes");
    return used;
  }
  if (parse_head()) decide_framing();
  return used;
}

bool RequestParser::parse_head() {
  if (head_.find('\0') != std::string::npos) {
    fail(400, "NUL byte in the request header");
    return false;
  }
  std::string_view rest(head_.data(), head_.size() - 2);  // without the final CRLF
  bool first = true;
  while (!rest.empty()) {
    const std::size_t eol = rest.find("\r\n");
    const std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    if (line.find_first_of("\r\n") != std::string_view::npos) {
      fail(400, "bare CR or LF in the request header");
      return false;
    }
    if (first) {
      if (line.size() > limits_.max_request_line) {
        fail(414,
             "request line longer than " + std::to_string(limits_.max_request_line) + " bytes");
        return false;
      }
      if (!parse_request_line(line)) return false;
      first = false;
    } else if (!parse_header_line(line)) {
      return false;
    }
  }
  return true;
}

bool RequestParser::parse_request_line(std::string_view line) {
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    fail(400, "malformed request line");
    return false;
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) {
    fail(400, "malformed request method");
    return false;
  }
  const bool visible = std::all_of(target.begin(), target.end(), [](char c) {
    return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
  if (target.empty() || !visible || (target[0] != '/' && target != "*")) {
    fail(400, "malformed request target");
    return false;
  }
  if (version.size() != 8 || version.compare(0, 5, "HTTP/") != 0 || version[6] != '.' ||
      version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9') {
    fail(400, "malformed HTTP version");
    return false;
  }
  if (version[5] != '1') {
    fail(505, "only HTTP/1.x is supported");
    return false;
  }
  request_.method = std::string(method);
  request_.target = std::string(target);
  const std::size_t q = target.find('?');
  request_.path = std::string(target.substr(0, q));
  request_.query = q == std::string_view::npos ? "" : std::string(target.substr(q + 1));
  request_.version_minor = version[7] - '0';
  return true;
}

bool RequestParser::parse_header_line(std::string_view line) {
  if (request_.headers.size() >= limits_.max_headers) {
    fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields");
    return false;
  }
  if (!line.empty() && (line[0] == ' ' || line[0] == '\t')) {
    fail(400, "obsolete header line folding");
    return false;
  }
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) {
    fail(400, "malformed header field");
    return false;
  }
  const std::string_view value = trim_ows(line.substr(colon + 1));
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      fail(400, "control character in header field '" + std::string(line.substr(0, colon)) + "'");
      return false;
    }
  }
  request_.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  return true;
}

bool RequestParser::decide_framing() {
  const Request& r = request_;
  std::string content_length;
  bool has_length = false, chunked = false;
  int hosts = 0;
  for (const auto& [name, value] : r.headers) {
    if (iequals(name, "Content-Length")) {
      // Identical repeats (RFC 9112 6.3) are one length; anything else is conflicting.
      if (has_length && value != content_length) {
        fail(400, "conflicting Content-Length headers");
        return false;
      }
      has_length = true;
      content_length = value;
    } else if (iequals(name, "Transfer-Encoding")) {
      if (chunked || !iequals(value, "chunked")) {
        fail(501, "unsupported Transfer-Encoding '" + value + "' (only chunked)");
        return false;
      }
      chunked = true;
    } else if (iequals(name, "Host")) {
      ++hosts;
    } else if (iequals(name, "Expect")) {
      if (!iequals(value, "100-continue")) {
        fail(417, "unsupported expectation '" + value + "'");
        return false;
      }
      expect_continue_ = true;
    }
  }
  const std::string connection = r.header("Connection");
  keep_alive_ = !has_token(connection, "close") &&
                (r.version_minor >= 1 || has_token(connection, "keep-alive"));
  if (hosts > 1 || (hosts == 0 && r.version_minor >= 1)) {
    fail(400, hosts == 0 ? "missing Host header" : "more than one Host header");
    return false;
  }
  if (chunked && has_length) {
    fail(400, "both Content-Length and Transfer-Encoding: chunked");
    return false;
  }
  if (chunked) {
    if (r.version_minor == 0) {
      fail(400, "Transfer-Encoding in an HTTP/1.0 request");
      return false;
    }
    state_ = State::kChunkSize;
    return true;
  }
  std::uint64_t length = 0;
  if (has_length) {
    if (content_length.empty() || content_length.size() > 19 ||
        content_length.find_first_not_of("0123456789") != std::string::npos) {
      fail(400, "malformed Content-Length '" + content_length + "'");
      return false;
    }
    length = std::stoull(content_length);
  }
  if (length > limits_.max_body_bytes) {
    fail(413, "request body larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
    return false;
  }
  request_.body.reserve(static_cast<std::size_t>(length));
  remaining_ = length;
  state_ = State::kBody;
  if (length == 0) complete();
  return true;
}

void RequestParser::parse_chunk_size_line(std::string_view line) {
  const std::size_t semi = line.find(';');
  const std::string_view hex = trim_ows(line.substr(0, semi));
  if (hex.empty() || hex.size() > 16 ||
      hex.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos) {
    fail(400, "malformed chunk size");
    return;
  }
  std::uint64_t size = 0;
  for (const char c : hex) {
    const int d = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    size = size * 16 + static_cast<std::uint64_t>(d);
  }
  if (size > limits_.max_body_bytes - request_.body.size()) {
    fail(413, "request body larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
    return;
  }
  remaining_ = size;
  state_ = size == 0 ? State::kTrailers : State::kChunkData;
}

// Chunk-size lines, chunk data and trailers. Lines are collected in line_ (bounded), so
// a chunk header split across reads parses the same as one in a single read.
std::size_t RequestParser::feed_chunked(std::string_view data) {
  if (state_ == State::kChunkData) {
    const std::size_t n =
        static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, data.size()));
    request_.body.append(data.data(), n);
    remaining_ -= n;
    if (remaining_ == 0) state_ = State::kChunkDataEnd;
    return n;
  }
  std::size_t used = 0;
  while (used < data.size()) {
    const char c = data[used++];
    line_.push_back(c);
    if (state_ == State::kChunkDataEnd) {
      if (line_.size() == 2) {
        if (line_ != "\r\n") {
          fail(400, "chunk data not followed by CRLF");
          return used;
        }
        line_.clear();
        state_ = State::kChunkSize;
        return used;
      }
      continue;
    }
    if (state_ == State::kTrailers) ++trailer_bytes_;
    if (c == '\0') {
      fail(400, "NUL byte in chunked framing");
      return used;
    }
    const std::size_t limit = state_ == State::kTrailers ? limits_.max_header_bytes : 1024;
    if (line_.size() > limit || trailer_bytes_ > limits_.max_header_bytes) {
      fail(state_ == State::kTrailers ? 431 : 400,
           state_ == State::kTrailers ? "trailer fields too large" : "chunk size line too long");
      return used;
    }
    if (c != '\n') continue;
    if (line_.size() < 2 || line_[line_.size() - 2] != '\r') {
      fail(400, "bare LF in chunked framing");
      return used;
    }
    const std::string_view line(line_.data(), line_.size() - 2);
    if (state_ == State::kChunkSize) {
      parse_chunk_size_line(line);
      line_.clear();
      return used;
    }
    // Trailers: an empty line ends the request; fields are checked and ignored.
    if (line.empty()) {
      line_.clear();
      complete();
      return used;
    }
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) {
      fail(400, "malformed trailer field");
      return used;
    }
    line_.clear();
  }
  return used;
}

}  // namespace detinfer_http
