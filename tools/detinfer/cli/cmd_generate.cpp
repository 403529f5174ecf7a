// `detinfer generate`: one request on a DeterministicSession, as text or one JSON object.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "command_registry.h"
#include "core/generation_fields.h"
#include "core/json_parse.h"
#include "core/vocabulary.h"
#include "detinfer/error.h"
#include "detinfer/hash.h"
#include "detinfer/session.h"
#include "fingerprint_log.h"
#include "generation_flags.h"
#include "session_flags.h"

namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  std::string prompt_ids;             // comma-separated token ids instead of text
  detinfer::GenerationConfig config;  // the sampling flags (generation_flags.h)
  bool json = false;
  bool stream = false;
  std::string fingerprint;  // JSON Lines file the run's fingerprint is appended to
  std::string transcript;   // file the run's transcript (detinfer.transcript/1) is written to
};

std::vector<std::int32_t> parse_ids(const std::string& s) {
  std::vector<std::int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      std::size_t used = 0;
      const long v = std::stol(item, &used);
      if (used != item.size() || v < INT32_MIN || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<std::int32_t>(v));
    } catch (const std::exception&) {
      throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                            "--prompt-ids: '" + item + "' is not a token id");
    }
  }
  return ids;
}

nlohmann::json sequence_json(const detinfer::Sequence& s) {
  nlohmann::json j = {{"tokens", s.tokens},
                      {"text", s.text},
                      {"finish_reason", detinfer::to_string(s.finish_reason)},
                      {"digest", detinfer::hex64(s.digest)},
                      {"score", s.score}};
  if (!s.logprobs.empty()) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& st : s.logprobs) {
      nlohmann::json top = nlohmann::json::array();
      for (const auto& t : st.top) top.push_back({{"token", t.token}, {"logprob", t.logprob}});
      steps.push_back({{"token", st.token}, {"logprob", st.logprob}, {"top", top}});
    }
    j["logprobs"] = steps;
  }
  return j;
}

// --transcript FILE: the result's transcript (detinfer.transcript/1) and a newline.
void write_transcript(const std::string& path, const detinfer::GenerationResult& r) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << r.transcript_json << "\n";
  if (!f.flush()) {
    throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                          "--transcript: cannot write " + path, "transcript");
  }
}

int run_generate(const GenerateOptions& o, const detinfer_cli::SessionFlags& flags) {
  detinfer_cli::ToolConfig tc = flags.resolve();
  // Without a file to write to, recording would only cost time.
  if (o.fingerprint.empty() && tc.fingerprint_log.path.empty() &&
      !flags.given("fingerprint.level")) {
    tc.session.recorder.level = detinfer::RecordLevel::kOff;
  }
  tc.session.recorder.path = o.fingerprint;
  const auto log = detinfer_cli::attach_fingerprint_log(tc);
  detinfer::DeterministicSession session =
      detinfer::DeterministicSession::open(o.model, tc.session);
  if (flags.print_config()) {
    flags.print(tc, session);
    return 0;
  }
  if (o.prompt.empty() && o.prompt_ids.empty()) {
    throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                          "give --prompt TEXT or --prompt-ids IDS", "prompt");
  }
  const std::string mode = detinfer::to_string(session.mode());
  const detinfer::GenerationConfig& c = o.config;
  const detinfer::Prompt prompt =
      o.prompt_ids.empty() ? detinfer::Prompt(o.prompt) : detinfer::Prompt(parse_ids(o.prompt_ids));
  detinfer::TokenCallback on_token;
  if (o.stream && !o.json) {
    on_token = [](const detinfer::TokenEvent& ev) {
      if (ev.sample_index == 0) std::cout << ev.text << std::flush;
      return true;
    };
  }
  const detinfer::GenerationResult r = session.generate(prompt, c, on_token);
  if (!o.transcript.empty()) write_transcript(o.transcript, r);
  if (o.json) {
    nlohmann::json j = sequence_json(r.sequences.at(0));
    j["seed"] = r.seed;
    j["prompt_tokens"] = r.prompt_tokens;
    j["model_fingerprint"] = session.model_fingerprint();
    j["mode"] = mode;
    j["detinfer"] = {{"transcript", nlohmann::json::parse(r.transcript_json)}};
    j["timings"] = {{"queue_ms", r.timings.queue_ms},
                    {"time_to_first_token_ms", r.timings.time_to_first_token_ms},
                    {"total_ms", r.timings.total_ms}};
    if (r.sequences.size() > 1) {
      nlohmann::json all = nlohmann::json::array();
      for (const auto& s : r.sequences) all.push_back(sequence_json(s));
      j["sequences"] = all;
    }
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  if (o.stream) {
    std::cout << "\n";
  } else {
    for (std::size_t i = 0; i < r.sequences.size(); ++i) {
      if (r.sequences.size() > 1) std::cout << "[" << i << "] ";
      std::cout << r.sequences[i].text << "\n";
    }
  }
  const detinfer::Sequence& s0 = r.sequences.at(0);
  std::cerr << "finish_reason=" << detinfer::to_string(s0.finish_reason) << " seed=" << r.seed
            << " tokens=" << s0.tokens.size() << " digest=" << detinfer::hex64(s0.digest)
            << " mode=" << mode << "\n";
  return 0;
}

const detinfer_cli::RegisterCommand kRegister(
    "generate", "Generate from a model folder (bitwise reproducible in canonical mode)",
    [](CLI::App& sub, int& exit_code) {
      auto o = std::make_shared<GenerateOptions>();
      sub.add_option("--model", o->model, "Model folder (config.json, *.safetensors) or GGUF file")
          ->required();
      auto* text = sub.add_option("--prompt", o->prompt, "Prompt text");
      auto* ids = sub.add_option("--prompt-ids", o->prompt_ids, "Prompt as token ids: 1,2,3");
      text->excludes(ids);
      detinfer_cli::add_generation_flags(sub, o->config);
      sub.add_flag("--json", o->json, "Print one JSON object");
      sub.add_flag("--stream", o->stream, "Print text as it is generated");
      sub.add_option("--fingerprint", o->fingerprint,
                     "Append the run fingerprint (one JSON line) to this file");
      sub.add_option("--transcript", o->transcript,
                     "Write the run's transcript (detinfer.transcript/1, for `detinfer verify`) "
                     "to this file");
      auto flags = std::make_shared<detinfer_cli::SessionFlags>(sub, false);
      sub.callback([o, flags, &exit_code] { exit_code = run_generate(*o, *flags); });
    });

}  // namespace
