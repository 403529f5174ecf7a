// `detinfer generate`: one request on a DeterministicSession, as text or one JSON object.
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "command_registry.h"
#include "detinfer/error.h"
#include "detinfer/hash.h"
#include "detinfer/session.h"
#include "fingerprint_log.h"
#include "session_flags.h"

namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  std::string prompt_ids;  // comma-separated token ids instead of text
  std::optional<std::uint64_t> seed;
  float temperature = 0.0f;
  float top_p = 1.0f;
  std::int32_t top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::int32_t max_new_tokens = 64;
  std::int32_t beams = 1;
  std::int32_t n = 1;
  float length_penalty = 1.0f;
  std::vector<std::string> stop;
  std::int32_t logprobs = 0;
  bool ignore_eos = false;
  bool json = false;
  bool stream = false;
  std::string fingerprint;  // JSON Lines file the run's fingerprint is appended to
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
  detinfer::GenerationConfig c;
  c.max_new_tokens = o.max_new_tokens;
  c.temperature = o.temperature;
  c.top_k = o.top_k;
  c.top_p = o.top_p;
  c.min_p = o.min_p;
  c.repetition_penalty = o.repetition_penalty;
  c.presence_penalty = o.presence_penalty;
  c.frequency_penalty = o.frequency_penalty;
  c.seed = o.seed;
  c.num_return_sequences = o.n;
  c.num_beams = o.beams;
  c.length_penalty = o.length_penalty;
  c.stop_strings = o.stop;
  c.logprobs = o.logprobs;
  c.ignore_eos = o.ignore_eos;
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
  if (o.json) {
    nlohmann::json j = sequence_json(r.sequences.at(0));
    j["seed"] = r.seed;
    j["prompt_tokens"] = r.prompt_tokens;
    j["model_fingerprint"] = session.model_fingerprint();
    j["mode"] = mode;
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
      sub.add_option("--model", o->model, "Model folder (config.json, *.safetensors)")->required();
      auto* text = sub.add_option("--prompt", o->prompt, "Prompt text");
      auto* ids = sub.add_option("--prompt-ids", o->prompt_ids, "Prompt as token ids: 1,2,3");
      text->excludes(ids);
      sub.add_option("--seed", o->seed, "Sampling seed (default: drawn and reported)");
      sub.add_option("--temperature", o->temperature, "0 = greedy")->capture_default_str();
      sub.add_option("--top-p", o->top_p, "Nucleus sampling")->capture_default_str();
      sub.add_option("--top-k", o->top_k, "0 = off")->capture_default_str();
      sub.add_option("--min-p", o->min_p, "0 = off")->capture_default_str();
      sub.add_option("--repetition-penalty", o->repetition_penalty, "1 = off")
          ->capture_default_str();
      sub.add_option("--presence-penalty", o->presence_penalty, "[-2, 2]")->capture_default_str();
      sub.add_option("--frequency-penalty", o->frequency_penalty, "[-2, 2]")->capture_default_str();
      sub.add_option("--max-new-tokens", o->max_new_tokens, "Tokens to generate")
          ->capture_default_str();
      sub.add_option("--beams", o->beams, "Beam search width (1 = off)")->capture_default_str();
      sub.add_option("--n", o->n, "Samples (or best beams) to return")->capture_default_str();
      sub.add_option("--length-penalty", o->length_penalty, "Beam search length penalty")
          ->capture_default_str();
      sub.add_option("--stop", o->stop, "Stop string (repeatable)");
      sub.add_option("--logprobs", o->logprobs, "Top-N logprobs per step (0..20)")
          ->capture_default_str();
      sub.add_flag("--ignore-eos", o->ignore_eos, "Generate max-new-tokens even past eos");
      sub.add_flag("--json", o->json, "Print one JSON object");
      sub.add_flag("--stream", o->stream, "Print text as it is generated");
      sub.add_option("--fingerprint", o->fingerprint,
                     "Append the run fingerprint (one JSON line) to this file");
      auto flags = std::make_shared<detinfer_cli::SessionFlags>(sub, false);
      sub.callback([o, flags, &exit_code] { exit_code = run_generate(*o, *flags); });
    });

}  // namespace
