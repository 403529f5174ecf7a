// `detinfer chat`: a conversation through the model's chat template. Interactive (stdin,
// streaming; /reset, /save FILE, /quit; multi-line input with a trailing '\' or between
// """ lines) or one reply to a --messages file (--json for one object).
#include <fstream>
#include <iostream>

#include "chat_cli_common.h"
#include "command_registry.h"
#include "detinfer/hash.h"
#include "detinfer/session.h"
#include "generation_flags.h"

namespace {

using Json = nlohmann::ordered_json;

struct ChatOptions {
  std::string model;
  std::string messages;
  std::string system;
  detinfer_cli::TemplateFlags flags;
  bool json = false;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<std::int32_t> top_k, max_new_tokens;
  std::optional<std::uint64_t> seed;
  std::string mode = detinfer::to_string(detinfer::NumericsMode::kCanonical);
  std::int32_t threads = 0;
  detinfer_cli::SpeculativeFlags speculative;
  std::string draft_model;
};

// The model's defaults (generation_config.json), then the flags given.
detinfer::GenerationConfig make_config(const detinfer::DeterministicSession& s,
                                       const ChatOptions& o) {
  detinfer::GenerationConfig c = s.default_generation_config();
  if (o.temperature) c.temperature = *o.temperature;
  if (o.top_p) c.top_p = *o.top_p;
  if (o.min_p) c.min_p = *o.min_p;
  if (o.repetition_penalty) c.repetition_penalty = *o.repetition_penalty;
  if (o.top_k) c.top_k = *o.top_k;
  if (o.max_new_tokens) c.max_new_tokens = *o.max_new_tokens;
  c.seed = o.seed;
  o.speculative.apply(c);
  return c;
}

Json turn_json(const detinfer::GenerationResult& r) {
  const detinfer::Sequence& s = r.sequences.at(0);
  Json j = {{"seed", r.seed},
            {"finish_reason", detinfer::to_string(s.finish_reason)},
            {"digest", detinfer::hex64(s.digest)},
            {"prompt_tokens", r.prompt_tokens.size()},
            {"completion_tokens", s.tokens.size()},
            {"prefix_cached_tokens", r.cache.prefix_cached_tokens}};
  if (!r.fingerprint_json.empty()) j["fingerprint"] = Json::parse(r.fingerprint_json);
  return j;
}

std::string dump(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

detinfer::TokenCallback print_stream() {
  return [](const detinfer::TokenEvent& ev) {
    if (ev.sample_index == 0) std::cout << ev.text << std::flush;
    return true;
  };
}

int run_once(detinfer::DeterministicSession& session, const ChatOptions& o) {
  detinfer::ChatTemplateOptions to = o.flags.options();
  std::vector<detinfer::ChatMessage> messages =
      detinfer_cli::read_messages_file(o.messages, &to.tools_json);
  if (!o.system.empty()) messages.insert(messages.begin(), {"system", o.system});
  const detinfer::GenerationConfig c = make_config(session, o);
  const detinfer::GenerationResult r =
      session.chat(messages, c, to, o.json ? detinfer::TokenCallback() : print_stream());
  if (o.json) {
    Json j = {{"message", {{"role", "assistant"}, {"content", r.sequences.at(0).text}}}};
    const Json turn = turn_json(r);
    for (const auto& [k, v] : turn.items()) j[k] = v;
    std::cout << dump(j) << "\n";
  } else {
    std::cout << "\n";
  }
  return 0;
}

// One user input: a line; a line ending in '\' continues on the next; a line holding only
// """ starts a block that ends at the next such line. False at end of input.
bool read_input(std::istream& in, std::string& out) {
  out.clear();
  std::string line;
  if (!std::getline(in, line)) return false;
  if (line == "\"\"\"") {
    bool first = true;
    while (std::getline(in, line) && line != "\"\"\"") {
      out += (first ? "" : "\n") + line;
      first = false;
    }
    return true;
  }
  while (!line.empty() && line.back() == '\\') {
    out += line.substr(0, line.size() - 1) + "\n";
    if (!std::getline(in, line)) return true;
  }
  out += line;
  return true;
}

void save(const std::string& path, const detinfer::DeterministicSession& s, const ChatOptions& o,
          const std::vector<detinfer::ChatMessage>& messages, const Json& turns) {
  const Json j = {{"model", o.model},
                  {"model_fingerprint", s.model_fingerprint()},
                  {"tokenizer_hash", s.tokenizer_hash()},
                  {"messages", Json::parse(detinfer::chat_messages_to_json(messages))},
                  {"turns", turns}};
  std::ofstream out(path, std::ios::binary);
  out << dump(j, 2) << "\n";
  if (!out) throw detinfer::Error(detinfer::ErrorCode::kUnavailable, "/save: cannot write " + path);
}

int run_interactive(detinfer::DeterministicSession& session, const ChatOptions& o) {
  const detinfer::ChatTemplateOptions to = o.flags.options();
  const detinfer::GenerationConfig c = make_config(session, o);
  std::vector<detinfer::ChatMessage> start;
  if (!o.system.empty()) start.push_back({"system", o.system});
  std::vector<detinfer::ChatMessage> messages = start;
  Json turns = Json::array();
  std::cerr << "chat with " << o.model << " (/reset, /save FILE, /quit; end a line with \\ "
            << "or wrap text in \"\"\" lines for several lines)\n";
  std::string input;
  while (std::cerr << "> " << std::flush, read_input(std::cin, input)) {
    if (input == "/quit" || input == "/exit") break;
    if (input == "/reset") {
      messages = start;
      turns = Json::array();
      std::cerr << "(conversation reset)\n";
      continue;
    }
    if (input.rfind("/save ", 0) == 0) {
      try {
        save(input.substr(6), session, o, messages, turns);
        std::cerr << "(saved " << turns.size() << " turns to " << input.substr(6) << ")\n";
      } catch (const detinfer::Error& e) {
        std::cerr << "detinfer: error: " << e.what() << "\n";
      }
      continue;
    }
    if (!input.empty() && input[0] == '/') {
      std::cerr << "unknown command " << input << " (/reset, /save FILE, /quit)\n";
      continue;
    }
    messages.push_back({"user", input});
    try {
      const detinfer::GenerationResult r = session.chat(messages, c, to, print_stream());
      std::cout << "\n" << std::flush;
      messages.push_back({"assistant", r.sequences.at(0).text});
      turns.push_back(turn_json(r));
    } catch (const detinfer::Error& e) {
      messages.pop_back();  // the turn failed: the conversation stays as it was
      std::cerr << "detinfer: error: " << e.what() << "\n";
    }
  }
  return 0;
}

int run_chat(const ChatOptions& o) {
  detinfer::SessionOptions so;
  so.mode = detinfer::parse_numerics_mode(o.mode);
  so.threads = o.threads;
  so.chat_template_path = o.flags.chat_template;
  so.draft_model_path = o.draft_model;
  auto session = detinfer::DeterministicSession::open(o.model, so);
  return o.messages.empty() ? run_interactive(session, o) : run_once(session, o);
}

const detinfer_cli::RegisterCommand kRegister(
    "chat", "Chat with a model through its chat template (interactive, or --messages FILE)",
    [](CLI::App& sub, int& exit_code) {
      auto o = std::make_shared<ChatOptions>();
      sub.add_option("--model", o->model, "Model folder")->required();
      sub.add_option("--messages", o->messages,
                     "Reply once to this conversation (JSON list of messages, or "
                     "{\"messages\": [...], \"tools\": [...]}) instead of chatting on stdin");
      sub.add_option("--system", o->system, "System message to start with");
      o->flags.add(sub);
      sub.add_flag("--json", o->json, "With --messages: print one JSON object");
      sub.add_option("--temperature", o->temperature, "Default: the model's (0 = greedy)");
      sub.add_option("--top-p", o->top_p, "Default: the model's");
      sub.add_option("--top-k", o->top_k, "Default: the model's");
      sub.add_option("--min-p", o->min_p, "Default: the model's");
      sub.add_option("--repetition-penalty", o->repetition_penalty, "Default: the model's");
      sub.add_option("--max-new-tokens", o->max_new_tokens, "Default: the model's");
      sub.add_option("--seed", o->seed, "Sampling seed (default: drawn and reported)");
      sub.add_option("--mode", o->mode, "canonical | fast")
          ->check(CLI::IsMember({detinfer::to_string(detinfer::NumericsMode::kCanonical),
                                 detinfer::to_string(detinfer::NumericsMode::kFast)}))
          ->capture_default_str();
      sub.add_option("--threads", o->threads, "Kernel threads (0 = all cores)")
          ->capture_default_str();
      o->speculative.add(sub);
      sub.add_option("--draft-model", o->draft_model,
                     "Draft model folder for --speculative draft (same tokenizer)");
      sub.callback([o, &exit_code] {
        if (o->json && o->messages.empty()) {
          throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                                "--json needs --messages FILE");
        }
        exit_code = run_chat(*o);
      });
    });

}  // namespace
