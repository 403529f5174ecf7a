// Python values -> GenerationConfig, prompts and scalars (convert.h).
#include "convert.h"

#include <pybind11/stl.h>

#include <limits>
#include <optional>
#include <type_traits>

#include "core/generation_fields.h"
#include "core/vocabulary.h"
#include "detinfer/error.h"

namespace detinfer_py {

void invalid(const std::string& field, const std::string& message) {
  throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument, field + ": " + message, field);
}

namespace {

std::string type_name(const py::handle& v) {
  return py::str(py::type::handle_of(v).attr("__name__")).cast<std::string>();
}

// Python's bool is an int: refuse it where an integer is meant (max_new_tokens=True).
bool is_int(const py::handle& v) {
  return py::isinstance<py::int_>(v) && !py::isinstance<py::bool_>(v);
}

// response_format: None, a type name ("text", "json_object") or OpenAI's object
// {"type": ..., "json_schema": {"schema": dict or JSON text}} (docs/structured.md).
detinfer::ResponseFormat response_format_from_python(const py::handle& v, const char* field) {
  detinfer::ResponseFormat f;
  if (v.is_none()) return f;
  py::handle type = v;
  if (py::isinstance<py::dict>(v)) {
    const py::dict d = py::reinterpret_borrow<py::dict>(v);
    if (!d.contains("type")) invalid(field, "expected a dict with a 'type'");
    type = d["type"];
    if (d.contains("json_schema")) {
      const py::handle js = d["json_schema"];
      if (!py::isinstance<py::dict>(js) ||
          !py::reinterpret_borrow<py::dict>(js).contains("schema")) {
        invalid(field, "json_schema must be a dict with a 'schema'");
      }
      const py::handle schema = py::reinterpret_borrow<py::dict>(js)["schema"];
      f.json_schema = py::isinstance<py::str>(schema)
                          ? to_str(schema, field)
                          : py::module_::import("json").attr("dumps")(schema).cast<std::string>();
    }
  } else if (!py::isinstance<py::str>(v)) {
    invalid(field, "expected None, a str or a dict, got " + type_name(v));
  }
  const auto t = detinfer::core::parse_response_format_type(to_str(type, field));
  if (!t) invalid(field, "type must be text, json_object or json_schema");
  f.type = *t;
  return f;
}

template <typename T>
void assign(T& member, const py::handle& v, const char* field) {
  if constexpr (std::is_same_v<T, bool>) {
    member = to_bool(v, field);
  } else if constexpr (std::is_same_v<T, float>) {
    member = static_cast<float>(to_double(v, field));
  } else if constexpr (std::is_integral_v<T>) {
    member = static_cast<T>(to_int(v, field, std::numeric_limits<T>::min(),
                                   static_cast<std::int64_t>(std::numeric_limits<T>::max())));
  } else if constexpr (std::is_same_v<T, std::optional<std::uint64_t>>) {
    if (v.is_none()) {
      member.reset();
    } else if (!is_int(v)) {
      invalid(field, "expected an int or None, got " + type_name(v));
    } else {
      // Any 64-bit value: a negative seed or one of 2^64 or more is out of range.
      const py::int_ i = py::reinterpret_borrow<py::int_>(v);
      if (i < py::int_(0) || i > py::int_(std::numeric_limits<std::uint64_t>::max())) {
        invalid(field, "expected a seed in [0, 2^64 - 1]");
      }
      member = i.cast<std::uint64_t>();
    }
  } else if constexpr (std::is_same_v<T, std::optional<std::vector<std::int32_t>>>) {
    if (v.is_none()) {
      member.reset();
    } else {
      member = token_ids_from_python(v, field);
    }
  } else if constexpr (std::is_same_v<T, detinfer::ResponseFormat>) {
    member = response_format_from_python(v, field);
  } else {
    static_assert(std::is_same_v<T, std::vector<std::string>>, "a new GenerationConfig type");
    member.clear();
    if (py::isinstance<py::str>(v)) {
      member.push_back(to_str(v, field));
      return;
    }
    if (!py::isinstance<py::sequence>(v)) {
      invalid(field, "expected a str or a list of str, got " + type_name(v));
    }
    for (const py::handle item : v) member.push_back(to_str(item, field));
  }
}

}  // namespace

std::int64_t to_int(const py::handle& v, const char* field, std::int64_t lo, std::int64_t hi) {
  if (!is_int(v)) invalid(field, "expected an int, got " + type_name(v));
  const py::int_ i = py::reinterpret_borrow<py::int_>(v);
  if (i < py::int_(lo) || i > py::int_(hi)) {
    invalid(field, "expected an int in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                       "], got " + py::str(v).cast<std::string>());
  }
  return i.cast<std::int64_t>();
}

double to_double(const py::handle& v, const char* field) {
  if (!(py::isinstance<py::float_>(v) || is_int(v))) {
    invalid(field, "expected a number, got " + type_name(v));
  }
  return v.cast<double>();
}

bool to_bool(const py::handle& v, const char* field) {
  if (!py::isinstance<py::bool_>(v)) invalid(field, "expected a bool, got " + type_name(v));
  return v.cast<bool>();
}

std::string to_str(const py::handle& v, const char* field) {
  if (!py::isinstance<py::str>(v)) invalid(field, "expected a str, got " + type_name(v));
  // Surrogates (str from invalid bytes) do not encode to UTF-8: name the field.
  try {
    return v.cast<std::string>();
  } catch (const py::error_already_set&) {
    invalid(field, "not encodable as UTF-8");
  } catch (const py::cast_error&) {
    invalid(field, "not encodable as UTF-8");
  }
}

std::vector<std::int32_t> token_ids_from_python(const py::handle& ids, const char* field) {
  if (py::isinstance<py::str>(ids) || py::isinstance<py::bytes>(ids) ||
      !py::hasattr(ids, "__iter__")) {
    invalid(field, "expected a list of token ids, got " + type_name(ids));
  }
  std::vector<std::int32_t> out;
  for (const py::handle item : ids) {
    // NumPy integers are not Python ints: take anything with __index__.
    py::object as_int = py::reinterpret_borrow<py::object>(item);
    if (!is_int(item) && py::hasattr(item, "__index__") && !py::isinstance<py::bool_>(item)) {
      as_int = item.attr("__index__")();
    }
    out.push_back(static_cast<std::int32_t>(to_int(as_int, field, 0, 0x7fffffff)));
  }
  return out;
}

detinfer::Prompt prompt_from_python(const py::handle& prompt) {
  if (py::isinstance<py::str>(prompt)) return detinfer::Prompt(to_str(prompt, "prompt"));
  return detinfer::Prompt(token_ids_from_python(prompt, "prompt"));
}

detinfer::GenerationConfig config_from_kwargs(detinfer::GenerationConfig base,
                                              const py::dict& kwargs) {
  for (const auto& item : kwargs) {
    const std::string key = py::str(item.first).cast<std::string>();
    bool found = false;
    detinfer::core::for_each_field(base, [&](const detinfer::core::FieldSpec& spec, auto& m) {
      if (found || key != spec.key) return;
      found = true;
      assign(m, item.second, spec.key);
    });
    if (!found) invalid(key, "unknown generation option '" + key + "'");
  }
  return base;
}

py::dict config_to_dict(const detinfer::GenerationConfig& config) {
  py::dict d;
  detinfer::core::for_each_field(config, [&](const detinfer::core::FieldSpec& spec, const auto& m) {
    using T = std::decay_t<decltype(m)>;
    if constexpr (std::is_same_v<T, detinfer::ResponseFormat>) {
      py::dict f;
      f["type"] = detinfer::to_string(m.type);
      if (m.type == detinfer::ResponseFormatType::kJsonSchema) {
        f["json_schema"] = py::dict(py::arg("schema") = m.json_schema);
      }
      d[spec.key] = f;
    } else {
      d[spec.key] = py::cast(m);
    }
  });
  return d;
}

std::vector<std::string> generation_field_names() {
  std::vector<std::string> names;
  const detinfer::GenerationConfig c;
  detinfer::core::for_each_field(
      c, [&](const detinfer::core::FieldSpec& spec, const auto&) { names.push_back(spec.key); });
  return names;
}

}  // namespace detinfer_py
