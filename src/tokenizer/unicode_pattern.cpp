// pin_unicode_categories (unicode_classes.h): a single pass over a PCRE2 pattern that
// tracks character classes, \Q...\E, comments and the case-insensitive flag of each group.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "tokenizer/unicode_classes.h"

namespace detinfer::tokenizer {
namespace {

class Pinner {
 public:
  Pinner(std::string_view p, std::string_view version)
      : p_(p), base_(version == unicode_categories_base_version()) {}

  std::string run() {
    while (i_ < p_.size()) {
      const char c = p_[i_];
      if (c == '\\') {
        escape();
      } else if (in_class_) {
        class_char();
      } else if (c == '[') {
        open_class();
      } else if (c == '(') {
        open_group();
      } else {
        if (c == ')' && caseless_.size() > 1) caseless_.pop_back();
        out_ += c;
        ++i_;
      }
    }
    return out_;
  }

 private:
  void copy(std::size_t n) {
    n = std::min(n, p_.size() - i_);
    out_.append(p_.substr(i_, n));
    i_ += n;
  }

  // A class: '[', an optional '^', and a ']' right after them is a literal.
  void open_class() {
    copy(1);
    if (i_ < p_.size() && p_[i_] == '^') copy(1);
    if (i_ < p_.size() && p_[i_] == ']') copy(1);
    in_class_ = true;
  }

  void class_char() {
    if (p_.compare(i_, 2, "[:") == 0) {  // POSIX class [:alpha:]
      const std::size_t end = p_.find(":]", i_ + 2);
      copy(end == std::string_view::npos ? p_.size() - i_ : end + 2 - i_);
      return;
    }
    if (p_[i_] == ']') in_class_ = false;
    copy(1);
  }

  // '(' starts a group with the enclosing flags; "(?flags:" with its own; "(?flags)"
  // changes the flags of the enclosing group; "(?#...)" is a comment.
  void open_group() {
    if (p_.compare(i_, 3, "(?#") == 0) {
      const std::size_t end = p_.find(')', i_);
      copy(end == std::string_view::npos ? p_.size() - i_ : end + 1 - i_);
      return;
    }
    bool caseless = caseless_.back();
    std::size_t j = i_ + 1;
    if (j < p_.size() && p_[j] == '?') {
      bool on = true;
      std::size_t k = j + 1;
      bool flags_only = true;
      for (; k < p_.size() && p_[k] != ':' && p_[k] != ')'; ++k) {
        if (p_[k] == '-') {
          on = false;
        } else if (std::isalpha(static_cast<unsigned char>(p_[k])) == 0 || p_[k] == 'P') {
          flags_only = false;  // (?=, (?<name>, (?P<name>, ...
          break;
        } else if (p_[k] == 'i') {
          caseless = on;
        }
      }
      if (flags_only && k < p_.size() && k > j + 1) {
        copy(k + 1 - i_);
        if (p_[k] == ')') {
          caseless_.back() = caseless;  // "(?i)": no group opened
        } else {
          caseless_.push_back(caseless);
        }
        return;
      }
    }
    caseless_.push_back(caseless_.back());
    copy(1);
  }

  void escape() {
    if (i_ + 1 >= p_.size()) {
      copy(1);
      return;
    }
    const char e = p_[i_ + 1];
    if (e == 'Q') {  // literal text up to \E
      const std::size_t end = p_.find("\\E", i_ + 2);
      copy(end == std::string_view::npos ? p_.size() - i_ : end + 2 - i_);
    } else if ((e == 'p' || e == 'P') && !caseless_.back()) {
      property(e == 'P');
    } else {
      copy(e == 'c' ? 3 : 2);  // \cX is three characters
    }
  }

  // \p / \P at i_: replaced by Unicode 16.0 ranges when it names a general category.
  void property(bool negated) {
    std::size_t end;
    std::string_view name;
    if (i_ + 2 < p_.size() && p_[i_ + 2] == '{') {
      end = p_.find('}', i_ + 3);
      if (end == std::string_view::npos) return copy(p_.size() - i_);  // PCRE2 reports it
      name = p_.substr(i_ + 3, end - i_ - 3);
      ++end;
    } else {
      end = i_ + 3;
      name = p_.substr(i_ + 2, 1);
    }
    if (!name.empty() && name[0] == '^') {
      negated = !negated;
      name.remove_prefix(1);
    }
    if (!spell(name, negated)) return copy(end - i_);  // PCRE2's own tables
    i_ = end;
  }

  // Appends Unicode 16.0's category `name` (negated: its complement); false when `name`
  // is not a general category.
  bool spell(std::string_view name, bool negated) {
    const std::string written = std::string(negated ? "\\P{" : "\\p{") + std::string(name) + "}";
    if (base_) {
      const std::optional<CategoryDelta> d = category_delta_since_14(name);
      if (!d) return false;
      if (d->added.empty() && d->removed.empty()) {
        out_ += written;
        return true;
      }
      if (d->removed.empty() && !negated) {  // [\p{X}gained] / inside a class \p{X}gained
        if (!in_class_) out_ += '[';
        out_ += written;
        append_code_ranges(out_, d->added);
        if (!in_class_) out_ += ']';
        return true;
      }
      if (d->removed.empty() && !in_class_) {  // not X now: not X then, and not gained
        out_ += "(?:(?![";
        append_code_ranges(out_, d->added);
        out_ += "])" + written + ")";
        return true;
      }
    }
    std::optional<std::vector<CodeRange>> ranges = category_ranges(name);
    if (!ranges) return false;
    if (negated) ranges = complement_ranges(*ranges);
    if (!in_class_) out_ += '[';
    append_code_ranges(out_, *ranges);
    if (!in_class_) out_ += ']';
    return true;
  }

  std::string_view p_;
  bool base_;  // PCRE2's tables are Unicode 14.0's
  std::size_t i_ = 0;
  std::string out_;
  bool in_class_ = false;
  std::vector<bool> caseless_{false};  // per open group
};

}  // namespace

std::string pin_unicode_categories(std::string_view pattern, std::string_view pcre2_unicode) {
  if (pcre2_unicode == unicode_categories_version()) return std::string(pattern);
  return Pinner(pattern, pcre2_unicode).run();
}

}  // namespace detinfer::tokenizer
