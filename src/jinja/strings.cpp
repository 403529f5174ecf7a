#include "jinja/strings.h"

#include <algorithm>

#include "jinja/render.h"

namespace detinfer::jinja {

std::uint32_t decode_utf8(std::string_view s, std::size_t& k) {
  const auto c = static_cast<unsigned char>(s[k]);
  int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
  std::uint32_t cp = n == 3 ? (c & 0x07u) : n == 2 ? (c & 0x0Fu) : n == 1 ? (c & 0x1Fu) : c;
  ++k;
  for (; n > 0 && k < s.size(); --n, ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[k]) & 0x3Fu);
  return cp;
}

bool is_python_space(std::uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

namespace {
// Code points of s with their byte offsets (begin of each, plus s.size() at the end).
std::vector<std::size_t> boundaries(const std::string& s, std::vector<std::uint32_t>& cps) {
  std::vector<std::size_t> at;
  std::size_t k = 0;
  while (k < s.size()) {
    at.push_back(k);
    cps.push_back(decode_utf8(s, k));
  }
  at.push_back(s.size());
  return at;
}
}  // namespace

std::string strip_text(const std::string& s, const std::string& chars, bool custom, bool left,
                       bool right) {
  std::vector<std::uint32_t> strip_set;
  if (custom) boundaries(chars, strip_set);
  auto strip = [&](std::uint32_t cp) {
    return custom ? std::find(strip_set.begin(), strip_set.end(), cp) != strip_set.end()
                  : is_python_space(cp);
  };
  std::vector<std::uint32_t> cps;
  const std::vector<std::size_t> at = boundaries(s, cps);
  std::size_t lo = 0;
  std::size_t hi = cps.size();
  while (left && lo < hi && strip(cps[lo])) ++lo;
  while (right && hi > lo && strip(cps[hi - 1])) --hi;
  return s.substr(at[lo], at[hi] - at[lo]);
}

std::vector<std::string> split_whitespace(const std::string& s, std::int64_t maxsplit,
                                          bool from_right) {
  std::vector<std::uint32_t> cps;
  const std::vector<std::size_t> at = boundaries(s, cps);
  std::vector<std::pair<std::size_t, std::size_t>> words;  // code point ranges
  std::size_t k = 0;
  while (k < cps.size()) {
    while (k < cps.size() && is_python_space(cps[k])) ++k;
    if (k == cps.size()) break;
    std::size_t j = k;
    while (j < cps.size() && !is_python_space(cps[j])) ++j;
    words.emplace_back(k, j);
    k = j;
  }
  std::vector<std::string> out;
  if (maxsplit < 0 || static_cast<std::size_t>(maxsplit) + 1 >= words.size()) {
    for (auto [a, b] : words) out.push_back(s.substr(at[a], at[b] - at[a]));
    return out;
  }
  const auto m = static_cast<std::size_t>(maxsplit);
  if (!from_right) {
    for (std::size_t w = 0; w < m; ++w)
      out.push_back(s.substr(at[words[w].first], at[words[w].second] - at[words[w].first]));
    std::string rest = s.substr(at[words[m].first]);
    out.push_back(strip_text(rest, "", false, false, true));
    return out;
  }
  const std::size_t keep = words.size() - m;
  std::string head = s.substr(0, at[words[keep - 1].second]);
  out.push_back(strip_text(head, "", false, true, false));
  for (std::size_t w = keep; w < words.size(); ++w)
    out.push_back(s.substr(at[words[w].first], at[words[w].second] - at[words[w].first]));
  return out;
}

std::vector<std::string> split_text(const std::string& s, const std::string& sep,
                                    std::int64_t maxsplit, bool from_right) {
  std::vector<std::size_t> hits;
  for (std::size_t at = s.find(sep); at != std::string::npos; at = s.find(sep, at + sep.size())) {
    hits.push_back(at);
  }
  if (maxsplit >= 0 && hits.size() > static_cast<std::size_t>(maxsplit)) {
    if (from_right) {
      // rsplit scans from the right: recompute non-overlapping hits from the end.
      hits.clear();
      std::size_t end = s.size();
      while (hits.size() < static_cast<std::size_t>(maxsplit) && end >= sep.size()) {
        const std::size_t at = s.rfind(sep, end - sep.size());
        if (at == std::string::npos) break;
        hits.insert(hits.begin(), at);
        end = at;
      }
    } else {
      hits.resize(static_cast<std::size_t>(maxsplit));
    }
  }
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t at : hits) {
    out.push_back(s.substr(start, at - start));
    start = at + sep.size();
  }
  out.push_back(s.substr(start));
  return out;
}

std::string ascii_upper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

namespace {
bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (static_cast<unsigned char>(c) & 0x80);
}
}  // namespace

std::string python_title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    if (c >= 'a' && c <= 'z' && !prev_cased)
      c = static_cast<char>(c - 'a' + 'A');
    else if (c >= 'A' && c <= 'Z' && prev_cased)
      c = static_cast<char>(c - 'A' + 'a');
    prev_cased = is_letter(c);
  }
  return out;
}

std::string capitalize_text(const std::string& s) {
  std::string out = ascii_lower(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z')
    out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

std::string jinja_title(const std::string& s) {
  // Words begin after runs of whitespace or any of -({[< ; each word is capitalized.
  std::string out;
  std::size_t k = 0;
  while (k < s.size()) {
    std::size_t j = k;
    auto sep = [&](char c) {
      return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
             c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    };
    if (sep(s[k])) {
      while (j < s.size() && sep(s[j])) ++j;
      out += s.substr(k, j - k);
    } else {
      while (j < s.size() && !sep(s[j])) ++j;
      std::string word = s.substr(k, j - k);
      std::string rest = ascii_lower(word.substr(1));
      out += ascii_upper(word.substr(0, 1)) + rest;
    }
    k = j;
  }
  return out;
}

std::string replace_text(Evaluator& e, const std::string& s, const std::string& from,
                         const std::string& to, std::int64_t count) {
  std::string out;
  std::size_t start = 0;
  std::int64_t done = 0;
  if (from.empty()) {
    // Python inserts `to` between code points (and at both ends).
    std::size_t k = 0;
    while (count < 0 || done < count) {
      out += to;
      ++done;
      if (k >= s.size()) break;
      const std::size_t begin = k;
      decode_utf8(s, k);
      out += s.substr(begin, k - begin);
      e.charge_string(out.size());
    }
    out += s.substr(std::min(k, s.size()));
    e.charge_string(out.size());
    return out;
  }
  for (std::size_t at = s.find(from); at != std::string::npos && (count < 0 || done < count);
       at = s.find(from, start)) {
    out.append(s, start, at - start);
    out += to;
    start = at + from.size();
    ++done;
    if (out.size() > e.limits().max_output_bytes) e.charge_string(out.size());
  }
  out.append(s, start, std::string::npos);
  e.charge_string(out.size());
  return out;
}

}  // namespace detinfer::jinja
