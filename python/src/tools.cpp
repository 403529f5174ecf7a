// Fingerprint diff, replay reports and logits arrays.
#include <pybind11/stl.h>

#include "bindings.h"
#include "convert.h"
#include "detinfer/fingerprint.h"
#include "detinfer/fingerprint_diff.h"
#include "detinfer/replay_report.h"
#include "detinfer/transcript.h"
#include "devtools/model_tools.h"

namespace detinfer_py {
namespace {

// The float32 logits [num_tokens, vocab_size] of one prefill, owned here and exposed
// through the buffer protocol: numpy.asarray(LogitsBuffer) shares this memory.
struct LogitsBuffer {
  detinfer::devtools::LogitsResult result;
};

void bind_diff(py::module_& m) {
  using detinfer::FingerprintDiff;
  py::class_<FingerprintDiff>(m, "FingerprintDiff",
                              "Which groups of two run fingerprints differ and where their "
                              "outputs diverge.")
      .def_property_readonly("groups",
                             [](const FingerprintDiff& d) {
                               py::dict out;
                               for (const auto& g : d.groups) {
                                 out[detinfer::to_string(g.group)] = g.fields;
                               }
                               return out;
                             })
      .def_readonly("outputs_identical", &FingerprintDiff::outputs_identical)
      .def_readonly("output_note", &FingerprintDiff::output_note)
      .def_property_readonly("identical", &FingerprintDiff::identical)
      .def_property_readonly("reproduced", &FingerprintDiff::reproduced)
      .def_property_readonly("divergence_step",
                             [](const FingerprintDiff& d) -> std::optional<std::int64_t> {
                               if (!d.divergence) return std::nullopt;
                               return d.divergence->step;
                             })
      .def("to_text", &FingerprintDiff::to_text)
      .def("to_json", &FingerprintDiff::to_json, py::arg("indent") = 2);
  m.def(
      "diff",
      [](const py::object& a, const py::object& b) {
        return detinfer::diff(detinfer::RunFingerprint::from_json(to_str(a, "a")),
                              detinfer::RunFingerprint::from_json(to_str(b, "b")));
      },
      py::arg("a"), py::arg("b"), "diff(a_json, b_json) -> FingerprintDiff of two fingerprints.");

  using detinfer::ReplayReport;
  py::class_<ReplayReport>(m, "ReplayReport", "The verdict of Session.replay(fingerprint).")
      .def_property_readonly("verdict",
                             [](const ReplayReport& r) { return detinfer::to_string(r.verdict); })
      .def_readonly("reason", &ReplayReport::reason)
      .def_readonly("diff", &ReplayReport::diff)
      .def_property_readonly("reproduced", &ReplayReport::reproduced)
      .def("to_text", &ReplayReport::to_text);
}

void bind_verify(py::module_& m) {
  using detinfer::VerifyDivergence;
  py::class_<VerifyDivergence>(m, "VerifyDivergence",
                               "Where a transcript first disagrees with the recomputation.")
      .def_readonly("sample", &VerifyDivergence::sample)
      .def_readonly("step", &VerifyDivergence::step, "0 = the first generated token.")
      .def_readonly("expected_token", &VerifyDivergence::expected_token,
                    "The token the model chooses there (-1: the sequence should have ended).")
      .def_readonly("recorded_token", &VerifyDivergence::recorded_token)
      .def_readonly("expected_digest", &VerifyDivergence::expected_digest)
      .def_readonly("recorded_digest", &VerifyDivergence::recorded_digest)
      .def_readonly("reason", &VerifyDivergence::reason);
  using detinfer::VerifyResult;
  py::class_<VerifyResult>(m, "VerifyResult", "The verdict of Session.verify(transcript).")
      .def_readonly("verified", &VerifyResult::verified)
      .def_readonly("divergence", &VerifyResult::divergence, "None when verified.")
      .def_readonly("steps_checked", &VerifyResult::steps_checked)
      .def_readonly("message", &VerifyResult::message)
      .def("__bool__", [](const VerifyResult& r) { return r.verified; })
      .def("__repr__", [](const VerifyResult& r) { return "VerifyResult(" + r.message + ")"; });
}

}  // namespace

void bind_tools(py::module_& m) {
  bind_diff(m);
  bind_verify(m);
  py::class_<LogitsBuffer>(m, "_LogitsBuffer", py::buffer_protocol())
      .def_buffer([](LogitsBuffer& b) {
        return py::buffer_info(b.result.logits.data(), sizeof(float),
                               py::format_descriptor<float>::format(), 2,
                               {b.result.num_tokens, b.result.vocab_size},
                               {static_cast<py::ssize_t>(sizeof(float) * b.result.vocab_size),
                                static_cast<py::ssize_t>(sizeof(float))},
                               /*readonly=*/true);
      })
      .def_property_readonly("model_fingerprint",
                             [](const LogitsBuffer& b) { return b.result.model_fingerprint; });
  m.def(
      "_logits",
      [](const py::object& model, const py::object& tokens, const py::object& mode,
         const py::object& threads) {
        detinfer::devtools::LogitsRequest req;
        req.model_dir = to_str(model, "model");
        req.tokens = token_ids_from_python(tokens, "tokens");
        req.mode = detinfer::parse_numerics_mode(to_str(mode, "mode"));
        req.threads = static_cast<int>(to_int(threads, "threads", 1, 1024));
        auto b = std::make_unique<LogitsBuffer>();
        {
          py::gil_scoped_release release;
          b->result = detinfer::devtools::compute_logits(req);
        }
        return b;
      },
      py::arg("model"), py::arg("tokens"), py::arg("mode"), py::arg("threads"));
}

}  // namespace detinfer_py
