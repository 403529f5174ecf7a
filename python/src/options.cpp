// The one table of Session(model, **options) keywords: each row names a SessionOptions
// member, reads it from a Python value and writes it back (Session.options). Enum-like
// members take their library names ("canonical", "bf16", "steps", "info").
#include <pybind11/stl.h>

#include <functional>

#include "convert.h"
#include "detinfer/error.h"
#include "detinfer/fingerprint.h"
#include "detinfer/logging.h"
#include "detinfer/numerics.h"

namespace detinfer_py {
namespace {

using detinfer::SessionOptions;

struct OptionRow {
  const char* name;
  std::function<void(SessionOptions&, const py::handle&)> set;
  std::function<py::object(const SessionOptions&)> get;
};

template <typename T>
OptionRow int_row(const char* name, T SessionOptions::*member, std::int64_t lo, std::int64_t hi) {
  return {name,
          [=](SessionOptions& o, const py::handle& v) {
            o.*member = static_cast<T>(to_int(v, name, lo, hi));
          },
          [=](const SessionOptions& o) -> py::object { return py::int_(o.*member); }};
}

OptionRow str_row(const char* name, std::string SessionOptions::*member) {
  return {name, [=](SessionOptions& o, const py::handle& v) { o.*member = to_str(v, name); },
          [=](const SessionOptions& o) -> py::object { return py::str(o.*member); }};
}

constexpr std::int64_t kI32 = 0x7fffffff;
constexpr std::int64_t kI64 = 0x7fffffffffffffffLL;

const std::vector<OptionRow>& rows() {
  static const std::vector<OptionRow> table = {
      {"mode",
       [](SessionOptions& o, const py::handle& v) {
         o.mode = detinfer::parse_numerics_mode(to_str(v, "mode"));
       },
       [](const SessionOptions& o) -> py::object { return py::str(detinfer::to_string(o.mode)); }},
      str_row("device", &SessionOptions::device),
      {"kv_dtype",
       [](SessionOptions& o, const py::handle& v) {
         o.kv_dtype = detinfer::parse_kv_dtype(to_str(v, "kv_dtype"));
       },
       [](const SessionOptions& o) -> py::object {
         return py::str(detinfer::to_string(o.kv_dtype));
       }},
      // Ranges here only guard the C++ type; the session validates and names the field.
      int_row("threads", &SessionOptions::threads, -kI32 - 1, kI32),
      int_row("kv_budget_bytes", &SessionOptions::kv_budget_bytes, -kI64 - 1, kI64),
      int_row("kv_block_size", &SessionOptions::kv_block_size, -kI32 - 1, kI32),
      int_row("max_batch", &SessionOptions::max_batch, -kI32 - 1, kI32),
      int_row("prefill_chunk_tokens", &SessionOptions::prefill_chunk_tokens, -kI32 - 1, kI32),
      int_row("max_queue", &SessionOptions::max_queue, -kI32 - 1, kI32),
      {"log_level",
       [](SessionOptions& o, const py::handle& v) {
         if (v.is_none()) {
           o.log_level.reset();
         } else {
           o.log_level = detinfer::parse_log_level(to_str(v, "log_level"));
         }
       },
       [](const SessionOptions& o) -> py::object {
         if (!o.log_level) return py::none();
         static const char* const kNames[] = {"trace", "debug",    "info", "warn",
                                              "error", "critical", "off"};
         return py::str(kNames[static_cast<int>(*o.log_level)]);
       }},
      str_row("chat_template_path", &SessionOptions::chat_template_path),
      str_row("cache_salt", &SessionOptions::cache_salt),
      str_row("draft_model_path", &SessionOptions::draft_model_path),
      str_row("weights", &SessionOptions::weights),
      {"prefix_cache",
       [](SessionOptions& o, const py::handle& v) {
         o.cache.prefix.enabled = to_bool(v, "prefix_cache");
       },
       [](const SessionOptions& o) -> py::object { return py::bool_(o.cache.prefix.enabled); }},
      {"result_cache",
       [](SessionOptions& o, const py::handle& v) {
         o.cache.result.enabled = to_bool(v, "result_cache");
       },
       [](const SessionOptions& o) -> py::object { return py::bool_(o.cache.result.enabled); }},
      {"fingerprint_level",
       [](SessionOptions& o, const py::handle& v) {
         o.recorder.level = detinfer::parse_record_level(to_str(v, "fingerprint_level"));
       },
       [](const SessionOptions& o) -> py::object {
         return py::str(detinfer::to_string(o.recorder.level));
       }},
      {"fingerprint_path",
       [](SessionOptions& o, const py::handle& v) {
         o.recorder.path = to_str(v, "fingerprint_path");
       },
       [](const SessionOptions& o) -> py::object { return py::str(o.recorder.path); }},
      int_row("distribution_interval", &SessionOptions::distribution_interval, -kI32 - 1, kI32),
      int_row("distribution_window", &SessionOptions::distribution_window, -kI32 - 1, kI32),
  };
  return table;
}

}  // namespace

detinfer::SessionOptions session_options_from_kwargs(const py::dict& kwargs) {
  SessionOptions options;
  for (const auto& item : kwargs) {
    const std::string key = py::str(item.first).cast<std::string>();
    const OptionRow* row = nullptr;
    for (const auto& r : rows()) {
      if (key == r.name) row = &r;
    }
    if (row == nullptr) invalid(key, "unknown session option '" + key + "'");
    try {
      row->set(options, item.second);
    } catch (const detinfer::Error& e) {
      // The library's parsers name their own field ("numerics"): name the keyword.
      if (e.field() == key) throw;
      invalid(key, e.message());
    }
  }
  return options;
}

py::dict session_options_to_dict(const detinfer::SessionOptions& options) {
  py::dict d;
  for (const auto& r : rows()) d[r.name] = r.get(options);
  return d;
}

std::vector<std::string> session_option_names() {
  std::vector<std::string> names;
  for (const auto& r : rows()) names.emplace_back(r.name);
  return names;
}

}  // namespace detinfer_py
