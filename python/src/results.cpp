// GenerationResult and its parts as read-only Python objects. A result's shortcuts
// (tokens, text, finish_reason, digest, logprobs) are those of its first sequence, the
// only one unless num_return_sequences or num_beams ask for more.
#include <pybind11/stl.h>

#include <sstream>

#include "bindings.h"
#include "detinfer/generation.h"
#include "detinfer/hash.h"

namespace detinfer_py {
namespace {

using detinfer::GenerationResult;
using detinfer::Sequence;

const Sequence& first(const GenerationResult& r) {
  static const Sequence kEmpty;
  return r.sequences.empty() ? kEmpty : r.sequences.front();
}

void bind_parts(py::module_& m) {
  py::class_<detinfer::TokenLogprob>(m, "TokenLogprob", "A token and its logprob.")
      .def_readonly("token", &detinfer::TokenLogprob::token)
      .def_readonly("logprob", &detinfer::TokenLogprob::logprob)
      .def("__repr__", [](const detinfer::TokenLogprob& t) {
        return "TokenLogprob(token=" + std::to_string(t.token) +
               ", logprob=" + py::repr(py::float_(t.logprob)).cast<std::string>() + ")";
      });
  py::class_<detinfer::StepLogprobs>(
      m, "StepLogprobs",
      "One generated step: the chosen token, its logprob under the processed distribution "
      "and the top-N (logprob desc, token id asc).")
      .def_readonly("token", &detinfer::StepLogprobs::token)
      .def_readonly("logprob", &detinfer::StepLogprobs::logprob)
      .def_readonly("top", &detinfer::StepLogprobs::top);
  py::class_<detinfer::Timings>(m, "Timings", "Milliseconds: queue, first token, per token, total.")
      .def_readonly("queue_ms", &detinfer::Timings::queue_ms)
      .def_readonly("time_to_first_token_ms", &detinfer::Timings::time_to_first_token_ms)
      .def_readonly("token_ms", &detinfer::Timings::token_ms)
      .def_readonly("total_ms", &detinfer::Timings::total_ms);
  py::class_<detinfer::CacheUsage>(m, "CacheUsage", "What the caches served of a request.")
      .def_readonly("prefix_cached_tokens", &detinfer::CacheUsage::prefix_cached_tokens)
      .def_readonly("result_cache_hit", &detinfer::CacheUsage::result_cache_hit);
  py::class_<Sequence>(m, "Sequence", "One sample (or returned beam) of a request.")
      .def_readonly("tokens", &Sequence::tokens)
      .def_readonly("text", &Sequence::text)
      .def_property_readonly("finish_reason",
                             [](const Sequence& s) { return detinfer::to_string(s.finish_reason); })
      .def_readonly("logprobs", &Sequence::logprobs)
      .def_readonly("score", &Sequence::score)
      .def_readonly("digest", &Sequence::digest,
                    "Chain digest over the per-step logits digests (an int).")
      .def_property_readonly(
          "digest_hex", [](const Sequence& s) { return detinfer::hex64(s.digest); },
          "The chain digest as 16 hex digits.")
      .def_readonly("step_digests", &Sequence::step_digests,
                    "XXH3-64 of each step's fp32 logits bits.");
}

}  // namespace

void bind_results(py::module_& m) {
  bind_parts(m);
  py::class_<GenerationResult>(
      m, "GenerationResult",
      "What generate(), chat() and a submitted request return. tokens, text, finish_reason, "
      "digest, step_digests and logprobs are those of sequences[0].")
      .def_readonly("prompt_tokens", &GenerationResult::prompt_tokens)
      .def_readonly("sequences", &GenerationResult::sequences)
      .def_readonly("seed", &GenerationResult::seed, "The seed actually used.")
      .def_readonly("timings", &GenerationResult::timings)
      .def_readonly("cache", &GenerationResult::cache)
      .def_readonly("fingerprint_json", &GenerationResult::fingerprint_json,
                    "The run fingerprint as JSON ('' when the session records none).")
      .def_readonly("transcript_json", &GenerationResult::transcript_json,
                    "The transcript (detinfer.transcript/1) as JSON: what Session.verify "
                    "checks without regenerating.")
      .def_property_readonly("tokens", [](const GenerationResult& r) { return first(r).tokens; })
      .def_property_readonly("text", [](const GenerationResult& r) { return first(r).text; })
      .def_property_readonly(
          "finish_reason",
          [](const GenerationResult& r) { return detinfer::to_string(first(r).finish_reason); })
      .def_property_readonly("digest", [](const GenerationResult& r) { return first(r).digest; })
      .def_property_readonly(
          "digest_hex", [](const GenerationResult& r) { return detinfer::hex64(first(r).digest); })
      .def_property_readonly("step_digests",
                             [](const GenerationResult& r) { return first(r).step_digests; })
      .def_property_readonly("logprobs",
                             [](const GenerationResult& r) { return first(r).logprobs; })
      .def("__repr__", [](const GenerationResult& r) {
        std::ostringstream s;
        s << "GenerationResult(tokens=" << first(r).tokens.size()
          << ", finish_reason=" << detinfer::to_string(first(r).finish_reason)
          << ", seed=" << r.seed << ", digest=" << detinfer::hex64(first(r).digest) << ")";
        return s.str();
      });
}

}  // namespace detinfer_py
