// Test helper: a strict parser for the Prometheus text format 0.0.4, independent of
// the renderer, so that tests check the format rather than the code that wrote it.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace detinfer::testing {

struct Sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // unescaped values
  double value = 0;
  std::string label(const std::string& key) const {
    for (const auto& [k, v] : labels) {
      if (k == key) return v;
    }
    return {};
  }
};

struct ParsedFamily {
  std::string help;  // unescaped
  std::string type;
  std::vector<Sample> samples;
};

inline double parse_prom_value(const std::string& s) {
  if (s == "+Inf") return INFINITY;
  if (s == "-Inf") return -INFINITY;
  if (s == "NaN") return NAN;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') ADD_FAILURE() << "bad value '" << s << "'";
  return v;
}

// Parses `text`; every structural problem is a test failure. Samples are attached to
// the family declared by the preceding # TYPE line (histogram suffixes stripped).
inline std::map<std::string, ParsedFamily> parse_prometheus(const std::string& text) {
  static const std::regex kName("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex kLabel("[a-zA-Z_][a-zA-Z0-9_]*");
  std::map<std::string, ParsedFamily> families;
  std::string current;
  std::istringstream in(text);
  std::string line;
  EXPECT_TRUE(text.empty() || text.back() == '\n') << "text must end with a newline";
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const bool help = line[2] == 'H';
      const std::string rest = line.substr(7);
      const std::size_t sp = rest.find(' ');
      const std::string name = rest.substr(0, sp);
      EXPECT_TRUE(std::regex_match(name, kName)) << "invalid name in: " << line;
      const std::string body = sp == std::string::npos ? "" : rest.substr(sp + 1);
      if (help) {
        EXPECT_EQ(families.count(name), 0u) << "HELP must come first for " << name;
        std::string unescaped;
        for (std::size_t i = 0; i < body.size(); ++i) {
          if (body[i] == '\\' && i + 1 < body.size()) {
            const char c = body[++i];
            EXPECT_TRUE(c == '\\' || c == 'n') << "bad HELP escape in: " << line;
            unescaped += c == 'n' ? '\n' : c;
          } else {
            EXPECT_NE(body[i], '\\') << "dangling backslash in: " << line;
            unescaped += body[i];
          }
        }
        families[name].help = unescaped;
      } else {
        EXPECT_TRUE(body == "counter" || body == "gauge" || body == "histogram" ||
                    body == "summary" || body == "untyped")
            << line;
        EXPECT_EQ(families.count(name), 1u) << "TYPE without HELP for " << name;
        EXPECT_TRUE(families[name].type.empty()) << "two TYPE lines for " << name;
        families[name].type = body;
        current = name;
      }
      continue;
    }
    EXPECT_FALSE(line.empty()) << "empty line";
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    EXPECT_TRUE(std::regex_match(s.name, kName)) << line;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const std::size_t eq = line.find('=', i);
        EXPECT_NE(eq, std::string::npos) << line;
        if (eq == std::string::npos) return families;
        const std::string key = line.substr(i, eq - i);
        EXPECT_TRUE(std::regex_match(key, kLabel)) << "label '" << key << "' in " << line;
        EXPECT_EQ(line[eq + 1], '"') << line;
        std::string value;
        std::size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\') {
            const char c = line[++j];
            EXPECT_TRUE(c == '\\' || c == '"' || c == 'n') << "bad escape in " << line;
            value += c == 'n' ? '\n' : c;
          } else {
            value += line[j];
          }
        }
        EXPECT_LT(j, line.size()) << "unterminated label value: " << line;
        s.labels.emplace_back(key, value);
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // '}'
    }
    EXPECT_EQ(line[i], ' ') << line;
    s.value = parse_prom_value(line.substr(i + 1));
    std::string family = s.name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string suf = suffix;
      if (families.count(family) == 0 && family.size() > suf.size() &&
          family.compare(family.size() - suf.size(), suf.size(), suf) == 0) {
        family = family.substr(0, family.size() - suf.size());
      }
    }
    EXPECT_EQ(family, current) << "sample outside its family: " << line;
    families[current].samples.push_back(s);
  }
  return families;
}

// Checks every histogram family: per label set, buckets are cumulative, le ascending,
// the last is +Inf and equals _count.
inline void expect_valid_histograms(const std::map<std::string, ParsedFamily>& families) {
  for (const auto& [name, f] : families) {
    if (f.type != "histogram") continue;
    std::map<std::string, std::vector<const Sample*>> buckets;  // by non-le labels
    std::map<std::string, double> counts;
    std::map<std::string, bool> has_sum;
    for (const Sample& s : f.samples) {
      std::string key;
      for (const auto& [k, v] : s.labels) {
        if (k != "le") key += k + "=" + v + ",";
      }
      if (s.name == name + "_bucket") {
        EXPECT_FALSE(s.label("le").empty()) << name;
        buckets[key].push_back(&s);
      } else if (s.name == name + "_count") {
        counts[key] = s.value;
      } else if (s.name == name + "_sum") {
        has_sum[key] = true;
      } else {
        ADD_FAILURE() << "unexpected sample " << s.name << " in histogram " << name;
      }
    }
    EXPECT_FALSE(buckets.empty()) << name;
    for (const auto& [key, bs] : buckets) {
      double prev_le = -INFINITY, prev_count = 0;
      for (const Sample* b : bs) {
        const double le = parse_prom_value(b->label("le"));
        EXPECT_GT(le, prev_le) << name << " le not ascending";
        EXPECT_GE(b->value, prev_count) << name << " buckets not cumulative";
        prev_le = le;
        prev_count = b->value;
      }
      EXPECT_EQ(bs.back()->label("le"), "+Inf") << name << " must end with +Inf";
      ASSERT_EQ(counts.count(key), 1u) << name << " missing _count";
      EXPECT_EQ(bs.back()->value, counts[key]) << name << " +Inf != _count";
      EXPECT_TRUE(has_sum[key]) << name << " missing _sum";
    }
  }
}

}  // namespace detinfer::testing
