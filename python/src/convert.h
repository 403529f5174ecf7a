// Python values -> detinfer options (docs/python.md): the keyword names of Session(...)
// (one table, options.cpp) and of generate(..., **config) (GenerationConfig's field table,
// src/core/generation_fields.h). A value of the wrong type or range throws
// detinfer::Error(kInvalidArgument) naming the keyword, as the library does for its own
// validation, so Python sees detinfer.InvalidArgumentError with .field set.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "detinfer/generation.h"
#include "detinfer/session.h"

namespace detinfer_py {

namespace py = pybind11;

// Session(model, **options): every keyword is one SessionOptions row (options.cpp).
detinfer::SessionOptions session_options_from_kwargs(const py::dict& kwargs);
// The resolved options of a session as {keyword: value} (the same rows).
py::dict session_options_to_dict(const detinfer::SessionOptions& options);
// The keyword names Session accepts, in table order.
std::vector<std::string> session_option_names();

// Applies generate(..., **config) keywords onto `base`; unknown keywords are an error
// naming the keyword. Validation of ranges stays with the session (it names the field).
detinfer::GenerationConfig config_from_kwargs(detinfer::GenerationConfig base,
                                              const py::dict& kwargs);
py::dict config_to_dict(const detinfer::GenerationConfig& config);
std::vector<std::string> generation_field_names();

// A prompt: str, or a sequence of token ids (list, tuple, any iterable of int).
detinfer::Prompt prompt_from_python(const py::handle& prompt);
std::vector<std::int32_t> token_ids_from_python(const py::handle& ids, const char* field);

// Scalar conversions naming `field` on a wrong type or an out-of-range integer.
std::int64_t to_int(const py::handle& v, const char* field, std::int64_t lo, std::int64_t hi);
double to_double(const py::handle& v, const char* field);
bool to_bool(const py::handle& v, const char* field);
std::string to_str(const py::handle& v, const char* field);

[[noreturn]] void invalid(const std::string& field, const std::string& message);

}  // namespace detinfer_py
