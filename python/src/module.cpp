// detinfer._detinfer: the C++ half of the `detinfer` Python package (python/detinfer/).
// detinfer::Error becomes detinfer.Error's subclass for its code (python/detinfer/_errors.py)
// with .code, .field and .message.
#include <pybind11/stl.h>

#include "bindings.h"
#include "convert.h"
#include "detinfer/error.h"
#include "detinfer/version.h"

namespace detinfer_py {

void bind_errors(py::module_& m) {
  (void)m;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const detinfer::Error& e) {
      py::object make = py::module_::import("detinfer._errors").attr("_from_code");
      py::object err = make(static_cast<int>(e.code()), e.message(), e.field());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())), err.ptr());
    }
  });
}

}  // namespace detinfer_py

PYBIND11_MODULE(_detinfer, m) {
  namespace dp = detinfer_py;
  m.doc() = "detinfer: bitwise-reproducible LLM inference (C++ extension; use `import detinfer`).";
  m.attr("__version__") = DETINFER_VERSION_STRING;
  m.attr("SESSION_OPTIONS") = dp::session_option_names();
  m.attr("GENERATION_FIELDS") = dp::generation_field_names();
  dp::bind_errors(m);
  dp::bind_results(m);
  dp::bind_tokenizer(m);
  dp::bind_stream(m);
  dp::bind_session(m);
  dp::bind_tools(m);
}
