// detinfer._detinfer.Tokenizer: the model folder's tokenizer.json (or any file/folder).
#include "detinfer/tokenizer.h"

#include <pybind11/stl.h>

#include "bindings.h"
#include "convert.h"

namespace detinfer_py {

void bind_tokenizer(py::module_& m) {
  using detinfer::Tokenizer;
  py::class_<Tokenizer>(m, "Tokenizer", "A Hugging Face tokenizer.json (BPE) in C++.")
      .def_static(
          "load", [](const std::string& path) { return Tokenizer::load(path); }, py::arg("path"),
          "Loads a tokenizer.json file or a folder holding it (and tokenizer_config.json).")
      .def(
          "encode",
          [](const Tokenizer& t, const py::object& text, bool add_special_tokens) {
            const std::string s = to_str(text, "text");
            py::gil_scoped_release release;
            return t.encode(s, add_special_tokens);
          },
          py::arg("text"), py::arg("add_special_tokens") = true)
      .def(
          "decode",
          [](const Tokenizer& t, const py::object& ids, bool skip_special_tokens) {
            const std::vector<std::int32_t> v = token_ids_from_python(ids, "ids");
            py::gil_scoped_release release;
            return t.decode(v, skip_special_tokens);
          },
          py::arg("ids"), py::arg("skip_special_tokens") = false)
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size)
      .def("token_to_id", [](const Tokenizer& t, const std::string& s) { return t.token_to_id(s); })
      .def("id_to_token", &Tokenizer::id_to_token)
      .def_property_readonly("bos_token_id", &Tokenizer::bos_token_id)
      .def_property_readonly("eos_token_id", &Tokenizer::eos_token_id)
      .def("is_special", &Tokenizer::is_special)
      .def_property_readonly("hash", [](const Tokenizer& t) { return t.hash().hex(); });
}

}  // namespace detinfer_py
