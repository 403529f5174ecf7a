// RequestParser (tools/detinfer/http): strict RFC 9112 framing and every limit,
// fed whole and byte by byte (a request split anywhere parses the same).
#include <gtest/gtest.h>

#include <string>

#include "http/request_parser.h"

namespace detinfer_http {
namespace {

struct Parsed {
  RequestParser::Status status;
  int error = 0;
  std::string message;
  Request request;
  std::size_t used = 0;
  bool keep_alive = true;
};

Parsed parse(const std::string& text, HttpLimits limits = {}, bool byte_by_byte = false) {
  RequestParser p(limits);
  Parsed out;
  if (byte_by_byte) {
    for (std::size_t i = 0; i < text.size() && p.status() == RequestParser::Status::kNeedMore;
         ++i) {
      out.used += p.feed(std::string_view(text).substr(i, 1));
    }
  } else {
    out.used = p.feed(text);
  }
  out.status = p.status();
  out.error = p.error_status();
  out.message = p.error_message();
  out.keep_alive = p.keep_alive();
  if (out.status == RequestParser::Status::kComplete) out.request = p.take();
  return out;
}

std::string post(const std::string& headers, const std::string& body) {
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n" + body;
}

TEST(HttpParser, ParsesAContentLengthRequestWholeAndByteByByte) {
  const std::string text =
      "POST /v1/completions?fingerprint=full&x=a%20b HTTP/1.1\r\nHost: x\r\n"
      "Content-Length: 5\r\nX-Thing:  v \r\n\r\nhelloGET";
  for (bool split : {false, true}) {
    const Parsed p = parse(text, {}, split);
    ASSERT_EQ(p.status, RequestParser::Status::kComplete) << p.message;
    EXPECT_EQ(p.request.method, "POST");
    EXPECT_EQ(p.request.path, "/v1/completions");
    EXPECT_EQ(p.request.query_param("fingerprint"), "full");
    EXPECT_EQ(p.request.query_param("x"), "a b");
    EXPECT_EQ(p.request.header("x-thing"), "v");
    EXPECT_EQ(p.request.body, "hello");
    EXPECT_EQ(p.used, text.size() - 3);  // the pipelined "GET" is left for the next request
    EXPECT_TRUE(p.keep_alive);
  }
}

TEST(HttpParser, DecodesChunkedBodiesWithExtensionsAndTrailers) {
  const std::string text = post("Transfer-Encoding: chunked\r\n",
                                "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: t\r\n\r\n");
  for (bool split : {false, true}) {
    const Parsed p = parse(text, {}, split);
    ASSERT_EQ(p.status, RequestParser::Status::kComplete) << p.message;
    EXPECT_EQ(p.request.body, "hello world");
    EXPECT_EQ(p.used, text.size());
  }
}

TEST(HttpParser, BodyLimitHoldsForEveryFraming) {
  HttpLimits l;
  l.max_body_bytes = 10;
  // Announced too large: refused at the header, before any body byte.
  EXPECT_EQ(parse(post("Content-Length: 10737418240\r\n", ""), l).error, 413);
  EXPECT_EQ(parse(post("Content-Length: 11\r\n", ""), l).error, 413);
  // Chunked: the running total is checked at each chunk size, so a huge chunk is refused
  // before its data, and many small chunks add up.
  EXPECT_EQ(parse(post("Transfer-Encoding: chunked\r\n", "ffffffffffff\r\n"), l).error, 413);
  EXPECT_EQ(parse(post("Transfer-Encoding: chunked\r\n", "6\r\naaaaaa\r\n5\r\n"), l).error, 413);
  EXPECT_EQ(
      parse(post("Transfer-Encoding: chunked\r\n", "5\r\naaaaa\r\n5\r\nbbbbb\r\n0\r\n\r\n"), l)
          .status,
      RequestParser::Status::kComplete);
}

TEST(HttpParser, HeaderLimits) {
  HttpLimits l;
  l.max_header_bytes = 1024;
  l.max_request_line = 200;
  l.max_headers = 5;
  EXPECT_EQ(parse("GET /" + std::string(300, 'a') + " HTTP/1.1\r\n", l).error, 414);
  EXPECT_EQ(parse("GET /" + std::string(300, 'a'), l).error, 414);  // no CRLF yet
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: x\r\nA: " + std::string(2000, 'a'), l).error, 431);
  std::string many = "GET / HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 6; ++i) many += "H" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(parse(many + "\r\n", l).error, 431);
  // Trailers count against the header limit too.
  EXPECT_EQ(
      parse(post("Transfer-Encoding: chunked\r\n", "0\r\nT: " + std::string(2000, 'a')), l).error,
      431);
}

TEST(HttpParser, StrictFramingIsBadRequest) {
  struct Case {
    const char* name;
    std::string text;
    int status;
  };
  const std::vector<Case> cases = {
      {"conflicting Content-Length", post("Content-Length: 3\r\nContent-Length: 4\r\n", "abcd"),
       400},
      {"Content-Length list", post("Content-Length: 3, 4\r\n", "abcd"), 400},
      {"CL and chunked", post("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"),
       400},
      {"signed Content-Length", post("Content-Length: +3\r\n", "abc"), 400},
      {"bad chunk size", post("Transfer-Encoding: chunked\r\n", "zz\r\n"), 400},
      {"chunk size overflow", post("Transfer-Encoding: chunked\r\n", "10000000000000000\r\n"), 400},
      {"chunk without CRLF", post("Transfer-Encoding: chunked\r\n", "3\r\nabcXY"), 400},
      {"bare LF in chunk line", post("Transfer-Encoding: chunked\r\n", "3\nabc"), 400},
      {"unknown encoding", post("Transfer-Encoding: gzip, chunked\r\n", ""), 501},
      {"NUL in header", std::string("GET / HTTP/1.1\r\nHost: x\r\nA: b\0c\r\n\r\n", 35), 400},
      {"NUL in chunk line", post("Transfer-Encoding: chunked\r\n", std::string("3\0\r\n", 4)), 400},
      {"space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400},
      {"folded header", "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400},
      {"bare LF", "GET / HTTP/1.1\nHost: x\r\n\r\n", 400},
      // Issue 33: a head whose lines all end in a bare LF is refused as it arrives, not
      // after the header timeout (the blank CRLF line never comes).
      {"bare LF head, incomplete", "POST /v1/completions HTTP/1.1\nHost: x\n", 400},
      {"bare LF head, whole", "POST /v1/completions HTTP/1.1\nHost: x\n\n{}", 400},
      {"missing Host", "GET / HTTP/1.1\r\n\r\n", 400},
      {"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
      {"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
      {"garbage version", "GET / HTTX/1.1\r\nHost: x\r\n\r\n", 400},
      {"absolute target", "GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"unknown expectation", "GET / HTTP/1.1\r\nHost: x\r\nExpect: magic\r\n\r\n", 417},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    for (bool split : {false, true}) {
      const Parsed p = parse(c.text, {}, split);
      EXPECT_EQ(p.status, RequestParser::Status::kError);
      EXPECT_EQ(p.error, c.status) << p.message;
      EXPECT_FALSE(p.message.empty());
    }
  }
  // Identical repeated Content-Length is one length (RFC 9112 6.3).
  EXPECT_EQ(parse(post("Content-Length: 3\r\nContent-Length: 3\r\n", "abc")).status,
            RequestParser::Status::kComplete);
}

TEST(HttpParser, KeepAliveRulesAndExpectContinue) {
  EXPECT_FALSE(parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").keep_alive);
  EXPECT_FALSE(parse("GET / HTTP/1.0\r\n\r\n").keep_alive);
  EXPECT_TRUE(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
  RequestParser p;
  p.feed(post("Expect: 100-continue\r\nContent-Length: 3\r\n", ""));
  EXPECT_TRUE(p.headers_done());
  EXPECT_TRUE(p.expects_continue());
  EXPECT_EQ(p.status(), RequestParser::Status::kNeedMore);
  p.feed("abc");
  EXPECT_EQ(p.status(), RequestParser::Status::kComplete);
}

TEST(HttpParser, PipelinedRequestsParseOneAfterAnother) {
  const std::string one = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string two = post("Content-Length: 2\r\n", "hi");
  const std::string three = "\r\nGET /c HTTP/1.1\r\nHost: x\r\n\r\n";  // a stray CRLF first
  std::string all = one + two + three;
  RequestParser p;
  std::vector<std::string> paths;
  while (!all.empty()) {
    all.erase(0, p.feed(all));
    ASSERT_EQ(p.status(), RequestParser::Status::kComplete);
    paths.push_back(p.take().path);
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"/a", "/v1/completions", "/c"}));
}

// A bare LF in the body is the body's business: only the head must use CRLF.
TEST(HttpParser, BareLfInTheBodyIsNotAHeaderError) {
  for (bool split : {false, true}) {
    const Parsed p = parse(post("Content-Length: 5\r\n", "a\nb\n\n"), {}, split);
    ASSERT_EQ(p.status, RequestParser::Status::kComplete) << p.message;
    EXPECT_EQ(p.request.body, "a\nb\n\n");
  }
}

}  // namespace
}  // namespace detinfer_http
