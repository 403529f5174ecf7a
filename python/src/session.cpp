// detinfer._detinfer.Session: DeterministicSession's methods with Python keywords
// (convert.h). Every call that runs the engine releases the GIL, so Python threads that
// call generate() at once are batched together like C++ threads.
#include "session.h"

#include <pybind11/stl.h>

#include <cstdint>

#include "bindings.h"
#include "convert.h"
#include "detinfer/transcript.h"
#include "stream.h"

namespace detinfer_py {
namespace {

using detinfer::DeterministicSession;
using detinfer::GenerationConfig;

std::string json_dumps(const py::handle& v) {
  return py::module_::import("json").attr("dumps")(v).cast<std::string>();
}

// messages: a list of OpenAI-shaped dicts, checked by the library's own parser
// (chat_messages_from_json names the offending element, e.g. "messages[2].content").
std::vector<detinfer::ChatMessage> messages_from_python(const py::handle& messages) {
  if (!py::isinstance<py::list>(messages) && !py::isinstance<py::tuple>(messages)) {
    invalid("messages", "expected a list of {'role', 'content'} dicts");
  }
  std::string text;
  try {
    text = json_dumps(messages);
  } catch (const py::error_already_set& e) {
    invalid("messages", std::string("not JSON-serializable: ") + e.what());
  }
  return detinfer::chat_messages_from_json(text);
}

detinfer::ChatTemplateOptions template_options(const py::handle& tools, bool add_generation_prompt,
                                               const std::string& template_name,
                                               const py::handle& template_kwargs,
                                               const py::handle& now) {
  detinfer::ChatTemplateOptions o;
  o.add_generation_prompt = add_generation_prompt;
  o.template_name = template_name;
  if (!tools.is_none()) {
    if (!py::isinstance<py::list>(tools)) invalid("tools", "expected a list of tool dicts");
    o.tools_json = json_dumps(tools);
  }
  if (!template_kwargs.is_none()) {
    if (!py::isinstance<py::dict>(template_kwargs)) {
      invalid("chat_template_kwargs", "expected a dict");
    }
    o.extra_variables_json = json_dumps(template_kwargs);
  }
  if (!now.is_none()) o.now_unix_seconds = to_int(now, "now", INT64_MIN, INT64_MAX);
  return o;
}

#define DETINFER_CHAT_ARGS                                                         \
  py::arg("messages"), py::kw_only(),                                              \
      py::arg("tools") = py::none(), py::arg("add_generation_prompt") = true,      \
      py::arg("template_name") = "", py::arg("chat_template_kwargs") = py::none(), \
      py::arg("now") = py::none()

const char* const kGenerateDoc =
    "generate(prompt, **config) -> GenerationResult\n\n"
    "prompt: str (encoded with the model's tokenizer) or a list of token ids. config: the "
    "GenerationConfig fields by name (detinfer.GENERATION_FIELDS), e.g. max_new_tokens=16, "
    "temperature=0.7, seed=1. Releases the GIL while the engine runs.";

void bind_generation(py::class_<PySession>& c) {
  c.def(
      "generate",
      [](PySession& s, const py::object& prompt, const py::kwargs& kw) {
        const detinfer::Prompt p = prompt_from_python(prompt);
        const GenerationConfig config = config_from_kwargs(GenerationConfig{}, kw);
        py::gil_scoped_release release;
        return s.session.generate(p, config);
      },
      py::arg("prompt"), kGenerateDoc);
  c.def(
      "stream",
      [](PySession& s, const py::object& prompt, const py::kwargs& kw) {
        const detinfer::Prompt p = prompt_from_python(prompt);
        const GenerationConfig config = config_from_kwargs(GenerationConfig{}, kw);
        return std::make_unique<Stream>(s.session, p, config);
      },
      py::arg("prompt"), py::keep_alive<0, 1>(),
      "stream(prompt, **config) -> Stream: an iterator of TokenDelta (same arguments as "
      "generate).");
  c.def(
      "_submit",
      [](PySession& s, const py::object& prompt, const py::kwargs& kw) {
        const detinfer::Prompt p = prompt_from_python(prompt);
        const GenerationConfig config = config_from_kwargs(GenerationConfig{}, kw);
        return std::make_unique<Request>(s.session.submit(p, config));
      },
      py::arg("prompt"), py::keep_alive<0, 1>());
}

void bind_chat(py::class_<PySession>& c) {
  c.def(
      "chat",
      [](PySession& s, const py::object& messages, const py::object& tools, bool agp,
         const std::string& name, const py::object& tkw, const py::object& now,
         const py::kwargs& kw) {
        const auto msgs = messages_from_python(messages);
        const auto opts = template_options(tools, agp, name, tkw, now);
        const GenerationConfig config =
            config_from_kwargs(s.session.default_generation_config(), kw);
        py::gil_scoped_release release;
        return s.session.chat(msgs, config, opts);
      },
      DETINFER_CHAT_ARGS,
      "chat(messages, tools=None, **config) -> GenerationResult\n\n"
      "Renders the conversation with the model's chat template and generates from it. config "
      "starts from the model's generation_config.json defaults (default_generation_config()).");
  c.def(
      "apply_chat_template",
      [](PySession& s, const py::object& messages, const py::object& tools, bool agp,
         const std::string& name, const py::object& tkw, const py::object& now) {
        return s.session.apply_chat_template(messages_from_python(messages),
                                             template_options(tools, agp, name, tkw, now));
      },
      DETINFER_CHAT_ARGS, "The prompt text the chat template makes of the conversation.");
  c.def(
      "encode_chat",
      [](PySession& s, const py::object& messages, const py::object& tools, bool agp,
         const std::string& name, const py::object& tkw, const py::object& now) {
        return s.session.encode_chat(messages_from_python(messages),
                                     template_options(tools, agp, name, tkw, now));
      },
      DETINFER_CHAT_ARGS, "The token ids of apply_chat_template(...).");
  c.def_property_readonly("has_chat_template",
                          [](const PySession& s) { return s.session.has_chat_template(); });
  c.def(
      "default_generation_config",
      [](const PySession& s) { return config_to_dict(s.session.default_generation_config()); },
      "The model's generation defaults as {field: value}.");
}

void bind_info(py::class_<PySession>& c) {
  c.def_property_readonly("model_dir", [](const PySession& s) { return s.model_dir; });
  c.def_property_readonly("model_fingerprint",
                          [](const PySession& s) { return s.session.model_fingerprint(); });
  c.def_property_readonly("tokenizer_hash",
                          [](const PySession& s) { return s.session.tokenizer_hash(); });
  c.def_property_readonly("mode",
                          [](const PySession& s) { return detinfer::to_string(s.session.mode()); });
  c.def_property_readonly("threads", [](const PySession& s) { return s.session.threads(); });
  c.def_property_readonly("eos_token_ids",
                          [](const PySession& s) { return s.session.eos_token_ids(); });
  c.def_property_readonly("vocab_size", [](const PySession& s) { return s.session.vocab_size(); });
  c.def_property_readonly("context_length",
                          [](const PySession& s) { return s.session.context_length(); });
  c.def_property_readonly("architecture",
                          [](const PySession& s) { return s.session.architecture(); });
  c.def_property_readonly(
      "options", [](const PySession& s) { return session_options_to_dict(s.session.options()); },
      "The session's options as {keyword: value}, auto (0) values resolved.");
  c.def("stats", [](const PySession& s) {
    const detinfer::SessionStats st = s.session.stats();
    py::dict d;
    d["queued"] = st.queued;
    d["running"] = st.running;
    d["kv_blocks_in_use"] = st.kv_blocks_in_use;
    d["kv_blocks_capacity"] = st.kv_blocks_capacity;
    d["steps"] = st.steps;
    return d;
  });
  c.def(
      "metrics_text", [](const PySession& s) { return s.session.metrics_text(); },
      "Prometheus text (format 0.0.4) of the session's metrics.");
  c.def("encode", [](const PySession& s, const py::object& text) {
    return s.session.encode(to_str(text, "text"));
  });
  c.def_property_readonly(
      "tokenizer", [](const PySession& s) { return s.session.tokenizer(); },
      py::return_value_policy::reference_internal,
      "The model folder's Tokenizer, or None without tokenizer.json.");
}

}  // namespace

void bind_session(py::module_& m) {
  py::class_<PySession> c(
      m, "Session",
      "Session(model, **options): a DeterministicSession over a model folder. options: the "
      "SessionOptions keywords (detinfer.SESSION_OPTIONS), e.g. threads=2, max_batch=8.");
  c.def(
      py::init([](const std::string& model, const py::kwargs& kw) {
        const detinfer::SessionOptions o = session_options_from_kwargs(kw);
        py::gil_scoped_release release;
        return std::make_unique<PySession>(PySession{DeterministicSession::open(model, o), model});
      }),
      py::arg("model"));
  bind_generation(c);
  bind_chat(c);
  bind_info(c);
  c.def(
      "replay",
      [](PySession& s, const py::object& fp) {
        const std::string json = to_str(fp, "fingerprint");
        py::gil_scoped_release release;
        return s.session.replay(json);
      },
      py::arg("fingerprint_json"),
      "Re-runs the request a fingerprint (JSON) records and compares every digest.");
  c.def(
      "verify",
      [](PySession& s, const py::object& transcript) -> py::object {
        if (py::isinstance<py::str>(transcript) || py::isinstance<py::bytes>(transcript)) {
          const detinfer::Transcript t =
              detinfer::Transcript::from_json(to_str(transcript, "transcript"));
          detinfer::VerifyResult r;
          {
            py::gil_scoped_release release;
            r = s.session.verify(t);
          }
          return py::cast(std::move(r));
        }
        std::vector<detinfer::Transcript> all;
        for (const py::handle item : py::iter(transcript)) {
          all.push_back(detinfer::Transcript::from_json(to_str(item, "transcript")));
        }
        std::vector<detinfer::VerifyResult> r;
        {
          py::gil_scoped_release release;
          r = s.session.verify(all);
        }
        return py::cast(std::move(r));
      },
      py::arg("transcript"),
      "Checks a transcript (GenerationResult.transcript_json) by one teacher-forced prefill "
      "instead of regenerating: VerifyResult, or a list of them for a list of transcripts "
      "(verified together, batched).");
  c.def("close", [](PySession& s) {
    py::gil_scoped_release release;
    s.session.close();
  });
  c.def_property_readonly("closed", [](const PySession& s) { return s.session.closed(); });
}

}  // namespace detinfer_py
