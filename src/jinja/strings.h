// Python str operations on UTF-8 text (whitespace as str.isspace() defines it; case
// mapping of ASCII letters only).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace detinfer::jinja {

class Evaluator;

std::string strip_text(const std::string& s, const std::string& chars, bool custom, bool left,
                       bool right);
std::vector<std::string> split_whitespace(const std::string& s, std::int64_t maxsplit,
                                          bool from_right);
std::vector<std::string> split_text(const std::string& s, const std::string& sep,
                                    std::int64_t maxsplit, bool from_right);
std::string ascii_upper(std::string s);
std::string ascii_lower(std::string s);
std::string python_title(const std::string& s);  // str.title()
std::string jinja_title(const std::string& s);   // the `title` filter
std::string capitalize_text(const std::string& s);
std::string replace_text(Evaluator& e, const std::string& s, const std::string& from,
                         const std::string& to, std::int64_t count);
// Decodes one code point at s[k], advancing k (invalid bytes decode as themselves).
std::uint32_t decode_utf8(std::string_view s, std::size_t& k);
bool is_python_space(std::uint32_t cp);

}  // namespace detinfer::jinja
