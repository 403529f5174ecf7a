// Filter implementations shared by filters.cpp (text and numbers) and filters_seq.cpp
// (sequences).
#pragma once

#include <string>

#include "jinja/render.h"

namespace detinfer::jinja {

using FilterFn = Value (*)(Evaluator&, const Value& value, const CallArgs& args);

// The sequence filters (filters_seq.cpp); null when `name` is not one of them.
FilterFn find_sequence_filter(const std::string& name);

// Jinja2's attribute getter: "a.b.0" looks up a, then b, then index 0.
Value get_attribute_path(const Value& item, const Value& path);
// A keyword argument by name, else the positional one at index, else null.
const Value* filter_arg(const CallArgs& args, const char* name, int index);
bool bool_arg(const CallArgs& args, const char* name, int index, bool dflt);
// The items a sequence filter works on (undefined: none).
Array sequence_items(const Value& value);
// Python splitlines() of text.
std::vector<std::string> split_lines(const std::string& s);

}  // namespace detinfer::jinja
