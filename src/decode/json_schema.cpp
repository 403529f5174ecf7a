#include "decode/json_schema.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "core/check.h"
#include "core/generation_fields.h"
#include "core/json_parse.h"
#include "decode/json_schema_passes.h"

namespace detinfer::decode {

namespace {

// Objects keep the schema text's key order: properties are generated in that order.
using json = nlohmann::ordered_json;

template <typename... Args>
[[noreturn]] void bad(const std::string& where, Args&&... args) {
  schema_error(where, str_cat(std::forward<Args>(args)...));
}

// Keywords that only annotate: accepted and not used. $defs/definitions hold schemas
// that are compiled only where a $ref names them.
const std::set<std::string> kAnnotations = {"$schema",  "$id",         "$comment",
                                            "title",    "description", "default",
                                            "examples", "$defs",       "definitions"};
const std::set<std::string> kObjectWords = {"properties", "required", "additionalProperties"};
const std::set<std::string> kArrayWords = {"items", "prefixItems", "minItems", "maxItems"};
const std::set<std::string> kStringWords = {"minLength", "maxLength", "format", "pattern"};
const std::set<std::string> kNumberWords = {"minimum", "maximum", "exclusiveMinimum",
                                            "exclusiveMaximum"};
const std::set<std::string> kOtherWords = {"type", "enum", "const", "anyOf", "oneOf"};

std::uint8_t type_bits(const json& v) {
  if (v.is_object()) return kObj;
  if (v.is_array()) return kArr;
  if (v.is_string()) return kStr;
  if (v.is_number()) return kNum;
  if (v.is_boolean()) return kBool;
  return kNull;
}

bool matches_type(const json& v, const std::string& t) {
  if (t == "integer") {
    return v.is_number_integer() ||
           (v.is_number_float() &&
            v.get<double>() == static_cast<double>(static_cast<std::int64_t>(v.get<double>())));
  }
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  return false;
}

// Every month-day of a non-leap year ("01-01" .. "12-31").
std::vector<std::string> month_days() {
  static const int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  std::vector<std::string> out;
  char buf[8];
  for (int m = 1; m <= 12; ++m) {
    for (int d = 1; d <= kDays[m - 1]; ++d) {
      buf[0] = static_cast<char>('0' + m / 10);
      buf[1] = static_cast<char>('0' + m % 10);
      buf[2] = '-';
      buf[3] = static_cast<char>('0' + d / 10);
      buf[4] = static_cast<char>('0' + d % 10);
      out.emplace_back(buf, 5);
    }
  }
  return out;
}

std::vector<FormatSegment> format_template(const std::string& name, const std::string& where) {
  const std::string digits = "0123456789";
  const std::string hex = "0123456789abcdef";
  if (name == "date") {  // years 1000..2999, every valid month-day of a non-leap year
    return {{"12", 1, {}}, {digits, 3, {}}, {"-", 1, {}}, {"", 0, month_days()}};
  }
  if (name == "uuid") {
    return {{hex, 8, {}}, {"-", 1, {}}, {hex, 4, {}}, {"-", 1, {}}, {hex, 4, {}},
            {"-", 1, {}}, {hex, 4, {}}, {"-", 1, {}}, {hex, 12, {}}};
  }
  bad(where, "unsupported string format '", name, "' (supported: date, uuid)");
}

std::int32_t count_of(const json& s, const char* key, const std::string& where) {
  const json& v = s[key];
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0) {
    bad(where, "'", key, "' must be a non-negative integer");
  }
  return static_cast<std::int32_t>(std::min<std::int64_t>(v.get<std::int64_t>(), INT32_MAX));
}

class Compiler {
 public:
  JsonGrammar g;
  std::vector<std::uint8_t> bits;  // per node

  std::int32_t add(Node n, std::uint8_t b, const std::string& where) {
    if (g.nodes.size() >= static_cast<std::size_t>(kMaxNodes)) {
      bad(where, "the schema is too large (more than ", kMaxNodes, " nodes)");
    }
    g.nodes.push_back(std::move(n));
    bits.push_back(b);
    return static_cast<std::int32_t>(g.nodes.size() - 1);
  }

  // Any JSON value: a union of free object, array, string, number, boolean and null.
  std::int32_t any() {
    if (any_ >= 0) return any_;
    any_ = add(Node{}, kAll, "");
    g.nodes[any_].kind = NodeKind::kUnion;
    Node obj, arr, str, num, boolean, null;
    obj.kind = NodeKind::kObject;
    obj.additional = any_;
    arr.kind = NodeKind::kArray;
    arr.items = any_;
    str.kind = NodeKind::kString;
    num.kind = NodeKind::kNumber;
    boolean.literals = {"true", "false"};
    null.literals = {"null"};
    std::vector<std::int32_t> alts = {add(obj, kObj, ""),      add(arr, kArr, ""),
                                      add(str, kStr, ""),      add(num, kNum, ""),
                                      add(boolean, kBool, ""), add(null, kNull, "")};
    g.nodes[any_].alts = std::move(alts);
    return any_;
  }

  std::int32_t compile(const json& s, const std::string& where);
  // Compiles the $ref targets met so far (and those they refer to) and fills their
  // placeholders. Called once, after the root.
  void resolve_refs();

  const json* root_ = nullptr;
  std::vector<OneOfCheck> one_ofs;

 private:
  struct Pending {
    std::int32_t node;  // the placeholder
    const json* target;
    std::string where;
  };
  std::int32_t any_ = -1;
  // Patterns compiled so far (equal ones shared) and their total size, bounded per schema.
  std::map<std::tuple<std::string, std::int32_t, std::int32_t>, std::shared_ptr<const PatternDfa>>
      patterns_;
  std::int64_t pattern_states_ = 0, pattern_cells_ = 0;
  std::shared_ptr<const PatternDfa> pattern(const std::string& text, std::int32_t min_length,
                                            std::int32_t max_length, const std::string& where) {
    auto& slot = patterns_[{text, min_length, max_length}];
    if (slot) return slot;
    slot = compile_pattern(text, min_length, max_length, where);
    pattern_states_ += slot->states;
    pattern_cells_ += static_cast<std::int64_t>(slot->ok.size());
    if (pattern_states_ > kMaxSchemaPatternStates || pattern_cells_ > kMaxSchemaPatternCells) {
      bad(where, "the schema's patterns need more than ", kMaxSchemaPatternStates,
          " DFA states or ", kMaxSchemaPatternCells, " length cells together");
    }
    return slot;
  }
  std::map<std::string, std::int32_t> refs_;  // $ref text -> placeholder
  std::vector<Pending> pending_;
  std::int32_t ref(const json& s, const std::string& where);
  std::int32_t literals(const json& s, const std::string& where);
  std::int32_t alternatives(const json& s, const std::string& where);
  std::int32_t typed(const json& s, const std::string& type, const std::string& where);
  std::int32_t object(const json& s, const std::string& where);
  std::int32_t array(const json& s, const std::string& where);
  std::int32_t string(const json& s, const std::string& where);
};

std::int32_t Compiler::compile(const json& s, const std::string& where) {
  if (s.is_boolean()) {
    if (s.get<bool>()) return any();
    bad(where, "the schema false admits no value");
  }
  if (!s.is_object()) bad(where, "a schema must be an object or a boolean");
  if (s.contains("$ref")) return ref(s, where);
  bool object_words = false, array_words = false, string_words = false, number_words = false;
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    if (kAnnotations.count(k) || kOtherWords.count(k)) continue;
    object_words = object_words || kObjectWords.count(k) > 0;
    array_words = array_words || kArrayWords.count(k) > 0;
    string_words = string_words || kStringWords.count(k) > 0;
    number_words = number_words || kNumberWords.count(k) > 0;
    if (!kObjectWords.count(k) && !kArrayWords.count(k) && !kStringWords.count(k) &&
        !kNumberWords.count(k)) {
      bad(where, "unsupported JSON Schema keyword '", k, "'");
    }
  }
  if (s.contains("enum") || s.contains("const")) return literals(s, where);
  if (s.contains("anyOf") || s.contains("oneOf")) return alternatives(s, where);
  if (s.contains("type")) {
    const json& t = s["type"];
    if (t.is_string()) return typed(s, t.get<std::string>(), where);
    if (!t.is_array() || t.empty()) bad(where, "'type' must be a string or a non-empty array");
    Node u;
    u.kind = NodeKind::kUnion;
    std::uint8_t b = 0;
    for (const json& one : t) {
      if (!one.is_string()) bad(where, "'type' entries must be strings");
      const std::int32_t n = typed(s, one.get<std::string>(), where);
      u.alts.push_back(n);
      b |= bits[n];
    }
    return add(std::move(u), b, where);
  }
  if (object_words + array_words + string_words + number_words > 1) {
    bad(where, "keywords of several types without 'type' are not supported");
  }
  if (object_words) return typed(s, "object", where);
  if (array_words) return typed(s, "array", where);
  if (string_words) return typed(s, "string", where);
  if (number_words) return typed(s, "number", where);
  return any();
}

std::int32_t Compiler::literals(const json& s, const std::string& where) {
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (!kAnnotations.count(it.key()) && it.key() != "type" && it.key() != "enum" &&
        it.key() != "const") {
      bad(where, "'", it.key(), "' beside enum/const is not supported");
    }
  }
  std::vector<json> values;
  if (s.contains("const")) values.push_back(s["const"]);
  if (s.contains("enum")) {
    if (!s["enum"].is_array()) bad(where, "'enum' must be an array");
    for (const json& v : s["enum"]) values.push_back(v);
  }
  Node n;
  std::uint8_t b = 0;
  for (const json& v : values) {
    bool ok = !s.contains("const") || v == s["const"];
    if (s.contains("type")) {
      const json& t = s["type"];
      bool any_type = false;
      for (const json& one : t.is_array() ? t : json::array({t})) {
        any_type = any_type || (one.is_string() && matches_type(v, one.get<std::string>()));
      }
      ok = ok && any_type;
    }
    if (!ok) continue;
    const std::string text = v.dump();
    if (std::find(n.literals.begin(), n.literals.end(), text) != n.literals.end()) continue;
    n.literals.push_back(text);
    b |= type_bits(v);
  }
  if (n.literals.empty()) bad(where, "enum/const admits no value");
  return add(std::move(n), b, where);
}

std::int32_t Compiler::alternatives(const json& s, const std::string& where) {
  const bool one_of = s.contains("oneOf");
  const char* word = one_of ? "oneOf" : "anyOf";
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (!kAnnotations.count(it.key()) && it.key() != word) {
      bad(where, "'", it.key(), "' beside ", word, " is not supported");
    }
  }
  const json& a = s[word];
  if (!a.is_array() || a.empty()) bad(where, "'", word, "' must be a non-empty array");
  Node u;
  u.kind = NodeKind::kUnion;
  std::uint8_t b = 0;  // final once $ref targets are in (finish_grammar)
  OneOfCheck check{{}, where};
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::int32_t n = compile(a[i], str_cat(where, "/", word, "/", i));
    check.alts.push_back(n);
    b |= bits[n];
    const Node& alt = g.nodes[n];
    if (alt.kind == NodeKind::kUnion) {
      u.alts.insert(u.alts.end(), alt.alts.begin(), alt.alts.end());
    } else {
      u.alts.push_back(n);
    }
  }
  if (one_of) one_ofs.push_back(std::move(check));
  if (u.alts.size() == 1) return u.alts[0];
  return add(std::move(u), b, where);
}

std::optional<NumberBounds> bounds_of(const json& s, bool integer, const std::string& where) {
  std::optional<double> v[4];
  bool any = false;
  std::size_t i = 0;
  for (const char* word : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
    if (s.contains(word)) {
      if (!s[word].is_number()) bad(where, "'", word, "' must be a number");
      v[i] = s[word].get<double>();
      any = true;
    }
    ++i;
  }
  if (!any) return std::nullopt;
  std::optional<NumberBounds> b = number_bounds(integer, v[0], v[1], v[2], v[3]);
  if (!b) {
    bad(where, "minimum/maximum admit no ", integer ? "integer" : "number",
        " that constrained decoding writes (at most ", kMaxIntDigits, " digits before the point, ",
        integer ? 0 : kMaxFracDigits, " after it)");
  }
  return b;
}

std::int32_t Compiler::ref(const json& s, const std::string& where) {
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (!kAnnotations.count(it.key()) && it.key() != "$ref") {
      bad(where, "'", it.key(), "' beside $ref is not supported");
    }
  }
  if (!s["$ref"].is_string()) bad(where, "'$ref' must be a string");
  const std::string text = s["$ref"].get<std::string>();
  const auto known = refs_.find(text);
  if (known != refs_.end()) return known->second;
  const json* target = resolve_schema_pointer(*root_, text, where);
  // A placeholder now, filled by resolve_refs: the target may refer back to it.
  const std::int32_t node = add(Node{}, 0, where);
  refs_.emplace(text, node);
  pending_.push_back({node, target, text.substr(1)});
  return node;
}

void Compiler::resolve_refs() {
  std::map<std::int32_t, std::pair<std::int32_t, std::string>> target;  // placeholder -> node
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    const Pending p = pending_[i];  // a copy: compiling may add to pending_
    target[p.node] = {compile(*p.target, p.where), p.where};
  }
  for (const auto& [node, first] : target) {
    std::int32_t x = first.first;
    for (std::size_t hops = 0; target.count(x) != 0; ++hops) {
      if (hops > target.size()) bad(first.second, "circular $ref with no schema in between");
      x = target[x].first;
    }
    g.nodes[node] = g.nodes[x];
    bits[node] = bits[x];
  }
}

std::int32_t Compiler::typed(const json& s, const std::string& type, const std::string& where) {
  if (type == "object") return object(s, where);
  if (type == "array") return array(s, where);
  if (type == "string") return string(s, where);
  Node n;
  if (type == "number" || type == "integer") {
    n.kind = type == "number" ? NodeKind::kNumber : NodeKind::kInteger;
    n.bounds = bounds_of(s, type == "integer", where);
    return add(std::move(n), kNum, where);
  }
  if (type == "boolean") {
    n.literals = {"true", "false"};
    return add(std::move(n), kBool, where);
  }
  if (type == "null") {
    n.literals = {"null"};
    return add(std::move(n), kNull, where);
  }
  bad(where, "unsupported type '", type, "'");
}

std::int32_t Compiler::object(const json& s, const std::string& where) {
  Node n;
  n.kind = NodeKind::kObject;
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) bad(where, "'properties' must be an object");
    for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
      if (it.key().size() > 1024) bad(where, "a property name is longer than 1024 bytes");
      Property p;
      p.key = json(it.key()).dump();
      p.value = compile(it.value(), str_cat(where, "/properties/", it.key()));
      n.props.push_back(std::move(p));
    }
  }
  const json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
  const bool closed = extra != nullptr && extra->is_boolean() && !extra->get<bool>();
  std::int32_t extra_node = -1;
  if (extra != nullptr && !closed) extra_node = compile(*extra, where + "/additionalProperties");
  if (s.contains("required")) {
    if (!s["required"].is_array()) bad(where, "'required' must be an array");
    for (const json& r : s["required"]) {
      if (!r.is_string()) bad(where, "'required' entries must be strings");
      const std::string key = r.dump();
      auto p = std::find_if(n.props.begin(), n.props.end(),
                            [&](const Property& q) { return q.key == key; });
      if (p == n.props.end()) {
        if (closed) bad(where, "required property ", key, " is not allowed by the schema");
        n.props.push_back({key, extra_node >= 0 ? extra_node : any(), true});
      } else {
        p->required = true;
      }
    }
  }
  if (n.props.empty() && !closed) n.additional = extra_node >= 0 ? extra_node : any();
  n.next_required.assign(n.props.size() + 1, static_cast<std::int32_t>(n.props.size()));
  for (std::size_t i = n.props.size(); i-- > 0;) {
    n.next_required[i] =
        n.props[i].required ? static_cast<std::int32_t>(i) : n.next_required[i + 1];
  }
  return add(std::move(n), kObj, where);
}

std::int32_t Compiler::array(const json& s, const std::string& where) {
  Node n;
  n.kind = NodeKind::kArray;
  if (s.contains("prefixItems")) {
    const json& p = s["prefixItems"];
    if (!p.is_array()) bad(where, "'prefixItems' must be an array");
    for (std::size_t i = 0; i < p.size(); ++i) {
      n.prefix.push_back(compile(p[i], str_cat(where, "/prefixItems/", i)));
    }
  }
  n.items = any();
  if (s.contains("items")) {
    const json& it = s["items"];
    n.items = it.is_boolean() && !it.get<bool>() ? -1 : compile(it, where + "/items");
  }
  if (s.contains("minItems")) n.min_items = count_of(s, "minItems", where);
  if (s.contains("maxItems")) n.max_items = count_of(s, "maxItems", where);
  if (n.items < 0) n.max_items = std::min<std::int32_t>(n.max_items, n.prefix.size());
  if (n.min_items > kMaxItemsBound) bad(where, "'minItems' above ", kMaxItemsBound);
  if (n.min_items > n.max_items) bad(where, "minItems/maxItems/items admit no array");
  return add(std::move(n), kArr, where);
}

std::int32_t Compiler::string(const json& s, const std::string& where) {
  Node n;
  n.kind = NodeKind::kString;
  if (s.contains("minLength")) n.min_length = count_of(s, "minLength", where);
  if (s.contains("maxLength")) n.max_length = count_of(s, "maxLength", where);
  if (n.min_length > kMaxItemsBound) bad(where, "'minLength' above ", kMaxItemsBound);
  if (n.min_length > n.max_length) bad(where, "minLength > maxLength admits no string");
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) bad(where, "'pattern' must be a string");
    if (s.contains("format")) bad(where, "'pattern' beside 'format' is not supported");
    n.kind = NodeKind::kPattern;
    n.pattern = pattern(s["pattern"].get<std::string>(), n.min_length, n.max_length, where);
  }
  if (s.contains("format")) {
    if (!s["format"].is_string()) bad(where, "'format' must be a string");
    n.format = format_template(s["format"].get<std::string>(), where);
    std::int32_t length = 0;
    for (const FormatSegment& f : n.format) length += f.literals.empty() ? f.count : 5;
    if (length < n.min_length || length > n.max_length) {
      bad(where, "format '", s["format"].get<std::string>(), "' has ", length,
          " characters, outside minLength/maxLength");
    }
  }
  return add(std::move(n), kStr, where);
}

}  // namespace

std::shared_ptr<const JsonGrammar> compile_response_format(const ResponseFormat& format) {
  if (format.type == ResponseFormatType::kText) {
    if (!format.json_schema.empty()) {
      bad("", "json_schema must be empty unless the type is json_schema");
    }
    return nullptr;
  }
  Compiler c;
  Node key;
  key.kind = NodeKind::kString;
  c.g.key_string = c.add(std::move(key), kStr, "");
  if (format.type == ResponseFormatType::kJsonObject) {
    if (!format.json_schema.empty()) {
      bad("", "json_schema must be empty unless the type is json_schema");
    }
    Node obj;
    obj.kind = NodeKind::kObject;
    obj.additional = c.any();
    c.g.root = c.add(std::move(obj), kObj, "");
  } else {
    if (format.json_schema.size() > core::kMaxJsonSchemaBytes) {
      bad("", "the schema is larger than ", core::kMaxJsonSchemaBytes, " bytes");
    }
    const json s = core::parse_json_ordered(
        format.json_schema, {kMaxSchemaDepth, core::kMaxJsonSchemaBytes, true},
        ErrorCode::kInvalidArgument, "response_format.json_schema");
    c.root_ = &s;
    c.g.root = c.compile(s, "");
    c.resolve_refs();
  }
  finish_grammar(c.g, c.bits, c.one_ofs);
  return std::make_shared<const JsonGrammar>(std::move(c.g));
}

}  // namespace detinfer::decode
