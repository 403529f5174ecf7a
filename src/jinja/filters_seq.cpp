// Filters on sequences and mappings: first, last, join, list, items, dictsort, map,
// select/reject(attr), unique, sort, reverse, min, max, sum, batch, attr.
#include <algorithm>
#include <string_view>

#include "jinja/filters.h"
#include "jinja/strings.h"

namespace detinfer::jinja {

Array sequence_items(const Value& value) { return iterate(value); }

Value get_attribute_path(const Value& item, const Value& path) {
  if (path.kind != Kind::kString) return get_item(item, path);
  Value current = item;
  const std::string& p = path.str();
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = p.find('.', start);
    const std::string part =
        p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    current = numeric ? get_item(current, Value::integer(std::stoll(part)))
                      : get_item(current, Value::string(part));
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

namespace {

// Jinja2's ignore_case: strings compare lowercased unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.kind == Kind::kString) return Value::string(ascii_lower(v.str()));
  return v;
}

Value f_first(Evaluator&, const Value& v, const CallArgs&) {
  const Array items = sequence_items(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Evaluator&, const Value& v, const CallArgs&) {
  const Array items = sequence_items(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_join(Evaluator& e, const Value& v, const CallArgs& a) {
  const Value* sep = filter_arg(a, "d", 0);
  const Value* attribute = filter_arg(a, "attribute", 1);
  const std::string d = sep != nullptr ? to_str(*sep) : "";
  std::string out;
  bool first = true;
  for (const Value& item : sequence_items(v)) {
    if (!first) out += d;
    first = false;
    append_str(out, attribute != nullptr ? get_attribute_path(item, *attribute) : item);
    e.charge_string(out.size());
  }
  return Value::string(std::move(out));
}

Value f_list(Evaluator&, const Value& v, const CallArgs&) {
  return Value::array(sequence_items(v));
}

Value f_items(Evaluator& e, const Value& v, const CallArgs& a) {
  if (v.is_undefined()) return Value::array({});
  if (v.kind != Kind::kDict) fail("Can only get item pairs from a mapping.");
  return e.call(bound_method(v, "items"), a);
}

Value f_dictsort(Evaluator&, const Value& v, const CallArgs& a) {
  if (v.kind != Kind::kDict) fail("dictsort() needs a mapping");
  const bool case_sensitive = bool_arg(a, "case_sensitive", 0, false);
  const Value* by = filter_arg(a, "by", 1);
  const bool by_value = by != nullptr && by->kind == Kind::kString && by->str() == "value";
  const bool reverse = bool_arg(a, "reverse", 2, false);
  std::vector<std::pair<Value, Value>> entries = v.dict->entries;
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    const Value kx = sort_key(by_value ? x.second : x.first, case_sensitive);
    const Value ky = sort_key(by_value ? y.second : y.first, case_sensitive);
    return reverse ? less(ky, kx) : less(kx, ky);
  });
  Array out;
  for (auto& [k, x] : entries) out.push_back(Value::array({k, x}, true));
  return Value::array(std::move(out));
}

Value f_map(Evaluator& e, const Value& v, const CallArgs& a) {
  Array out;
  const Value* attribute = filter_arg(a, "attribute", -1);
  if (attribute != nullptr) {
    const Value* dflt = filter_arg(a, "default", -1);
    for (const Value& item : sequence_items(v)) {
      Value x = get_attribute_path(item, *attribute);
      out.push_back(x.is_undefined() && dflt != nullptr ? *dflt : x);
    }
    return Value::array(std::move(out));
  }
  if (a.positional.empty() || a.positional[0].kind != Kind::kString)
    fail("map requires a filter argument");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : sequence_items(v))
    out.push_back(apply_filter(e, a.positional[0].str(), item, rest));
  return Value::array(std::move(out));
}

// select / reject / selectattr / rejectattr.
Value select_impl(Evaluator& e, const Value& v, const CallArgs& a, bool by_attr, bool keep) {
  std::size_t next = 0;
  const Value* attribute = nullptr;
  if (by_attr) {
    if (a.positional.empty()) fail("Missing parameter for attribute name");
    attribute = &a.positional[next++];
  }
  std::string test;
  if (next < a.positional.size()) {
    if (a.positional[next].kind != Kind::kString) fail("test name must be a string");
    test = a.positional[next++].str();
  }
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(next),
                         a.positional.end());
  rest.keyword = a.keyword;
  Array out;
  for (const Value& item : sequence_items(v)) {
    const Value x = attribute != nullptr ? get_attribute_path(item, *attribute) : item;
    const bool pass = test.empty() ? truthy(x) : apply_test(e, test, x, rest);
    if (pass == keep) out.push_back(item);
  }
  return Value::array(std::move(out));
}
Value f_select(Evaluator& e, const Value& v, const CallArgs& a) {
  return select_impl(e, v, a, false, true);
}
Value f_reject(Evaluator& e, const Value& v, const CallArgs& a) {
  return select_impl(e, v, a, false, false);
}
Value f_selectattr(Evaluator& e, const Value& v, const CallArgs& a) {
  return select_impl(e, v, a, true, true);
}
Value f_rejectattr(Evaluator& e, const Value& v, const CallArgs& a) {
  return select_impl(e, v, a, true, false);
}

Value keyed(const Value& item, const Value* attribute, bool case_sensitive) {
  return sort_key(attribute != nullptr ? get_attribute_path(item, *attribute) : item,
                  case_sensitive);
}

Value f_unique(Evaluator&, const Value& v, const CallArgs& a) {
  const bool case_sensitive = bool_arg(a, "case_sensitive", 0, false);
  const Value* attribute = filter_arg(a, "attribute", 1);
  Array out;
  Array seen;
  for (const Value& item : sequence_items(v)) {
    const Value key = keyed(item, attribute, case_sensitive);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); }))
      continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::array(std::move(out));
}

Value f_sort(Evaluator&, const Value& v, const CallArgs& a) {
  const bool reverse = bool_arg(a, "reverse", 0, false);
  const bool case_sensitive = bool_arg(a, "case_sensitive", 1, false);
  const Value* attribute = filter_arg(a, "attribute", 2);
  Array items = sequence_items(v);
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const Value kx = keyed(x, attribute, case_sensitive);
    const Value ky = keyed(y, attribute, case_sensitive);
    return reverse ? less(ky, kx) : less(kx, ky);
  });
  return Value::array(std::move(items));
}

Value f_reverse(Evaluator&, const Value& v, const CallArgs&) {
  if (v.kind == Kind::kString) {
    std::vector<std::string> chars = code_points(v.str());
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
    return Value::string(std::move(out));
  }
  Array items = sequence_items(v);
  std::reverse(items.begin(), items.end());
  return Value::array(std::move(items));
}

Value extreme(const Value& v, const CallArgs& a, bool want_max) {
  const bool case_sensitive = bool_arg(a, "case_sensitive", 0, false);
  const Value* attribute = filter_arg(a, "attribute", 1);
  const Array items = sequence_items(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  std::size_t best = 0;
  for (std::size_t k = 1; k < items.size(); ++k) {
    const Value kb = keyed(items[best], attribute, case_sensitive);
    const Value kk = keyed(items[k], attribute, case_sensitive);
    if (want_max ? less(kb, kk) : less(kk, kb)) best = k;
  }
  return items[best];
}
Value f_max(Evaluator&, const Value& v, const CallArgs& a) { return extreme(v, a, true); }
Value f_min(Evaluator&, const Value& v, const CallArgs& a) { return extreme(v, a, false); }

Value f_sum(Evaluator& e, const Value& v, const CallArgs& a) {
  const Value* attribute = filter_arg(a, "attribute", 0);
  const Value* start = filter_arg(a, "start", 1);
  Value total = start != nullptr ? *start : Value::integer(0);
  for (const Value& item : sequence_items(v)) {
    total = binary_op(e, "+", total,
                      attribute != nullptr ? get_attribute_path(item, *attribute) : item);
  }
  return total;
}

Value f_batch(Evaluator& e, const Value& v, const CallArgs& a) {
  const Value* count = filter_arg(a, "linecount", 0);
  if (count == nullptr || count->kind != Kind::kInt || count->i <= 0)
    fail("batch() needs a positive count");
  e.check_list_size(static_cast<std::size_t>(count->i));
  const Value* fill = filter_arg(a, "fill_with", 1);
  Array out;
  Array current;
  for (const Value& item : sequence_items(v)) {
    current.push_back(item);
    if (static_cast<std::int64_t>(current.size()) == count->i) {
      out.push_back(Value::array(std::move(current)));
      current.clear();
    }
  }
  if (!current.empty()) {
    while (fill != nullptr && static_cast<std::int64_t>(current.size()) < count->i)
      current.push_back(*fill);
    out.push_back(Value::array(std::move(current)));
  }
  return Value::array(std::move(out));
}

Value f_attr(Evaluator&, const Value& v, const CallArgs& a) {
  const Value* name = filter_arg(a, "name", 0);
  if (name == nullptr || name->kind != Kind::kString) fail("attr() needs a name");
  if (v.kind == Kind::kNamespace || v.kind == Kind::kList || v.kind == Kind::kString)
    return get_attr(v, name->str());
  Value method = bound_method(v, name->str());
  if (!method.is_undefined() || method.s) return method;
  return Value::undefined("'" + object_type_name(v) + "' has no attribute '" + name->str() + "'");
}

struct Entry {
  std::string_view name;
  FilterFn fn;
};

const Entry kSequenceFilters[] = {
    {"first", f_first},
    {"last", f_last},
    {"join", f_join},
    {"list", f_list},
    {"items", f_items},
    {"dictsort", f_dictsort},
    {"map", f_map},
    {"select", f_select},
    {"reject", f_reject},
    {"selectattr", f_selectattr},
    {"rejectattr", f_rejectattr},
    {"unique", f_unique},
    {"sort", f_sort},
    {"reverse", f_reverse},
    {"max", f_max},
    {"min", f_min},
    {"sum", f_sum},
    {"batch", f_batch},
    {"attr", f_attr},
};

}  // namespace

FilterFn find_sequence_filter(const std::string& name) {
  for (const auto& f : kSequenceFilters) {
    if (name == f.name) return f.fn;
  }
  return nullptr;
}

}  // namespace detinfer::jinja
