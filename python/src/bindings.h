// The parts of the detinfer._detinfer extension module, one function per file.
#pragma once

#include <pybind11/pybind11.h>

namespace detinfer_py {

namespace py = pybind11;

void bind_errors(py::module_& m);     // module.cpp: detinfer::Error -> detinfer.Error
void bind_results(py::module_& m);    // results.cpp: GenerationResult and its parts
void bind_tokenizer(py::module_& m);  // tokenizer.cpp: Tokenizer
void bind_stream(py::module_& m);     // stream.cpp: Stream, TokenDelta, Request
void bind_session(py::module_& m);    // session.cpp: Session
void bind_tools(py::module_& m);      // tools.cpp: diff, replay reports, logits arrays

}  // namespace detinfer_py
