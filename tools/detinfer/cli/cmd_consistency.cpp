// `detinfer consistency`: repeats one request N times while random background traffic
// runs concurrently, and counts distinct outputs — the Thinking Machines experiment.
// Locally (--model) in canonical and/or fast mode, or against any OpenAI-compatible
// /v1/completions endpoint (--url).
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli_random.h"
#include "command_registry.h"
#include "detinfer/error.h"
#include "detinfer/session.h"
#include "fingerprint_log.h"
#include "generation_flags.h"
#include "session_flags.h"

namespace {

using nlohmann::json;

struct ConsistencyOptions {
  std::string model;
  std::string url;
  bool chat = false;  // --url: audit /v1/chat/completions instead of /v1/completions
  std::string prompt = "The quick brown fox";
  std::int32_t runs = 100;
  std::int32_t max_new_tokens = 32;
  float temperature = 0.0f;
  std::optional<std::uint64_t> seed;
  std::int32_t concurrency = 4;  // background request streams
  std::int32_t background_max_tokens = 16;
  std::string mode =
      detinfer::to_string(detinfer::NumericsMode::kCanonical);  // canonical | fast | both
  detinfer::SessionOptions session;  // from the session flags (session_flags.h)
  std::uint64_t traffic_seed = 1;
  bool json = false;
  detinfer_cli::SpeculativeFlags speculative;  // of the repeated request
};

// One output, compared element by element: token ids locally, bytes of text over HTTP.
using Output = std::vector<std::int64_t>;

struct ModeReport {
  std::string mode;
  std::int32_t runs = 0;
  std::int32_t distinct = 0;
  std::int32_t most_common = 0;
  std::map<std::int64_t, std::int32_t> first_divergence;  // position -> runs
  std::string unit = "token";
};

ModeReport summarize(const std::string& mode, const std::vector<Output>& outputs) {
  ModeReport r;
  r.mode = mode;
  r.runs = static_cast<std::int32_t>(outputs.size());
  std::map<Output, std::int32_t> counts;
  for (const auto& o : outputs) ++counts[o];
  r.distinct = static_cast<std::int32_t>(counts.size());
  const Output* mode_output = nullptr;
  for (const auto& [o, c] : counts) {
    if (c > r.most_common) {
      r.most_common = c;
      mode_output = &o;
    }
  }
  if (mode_output == nullptr) return r;
  for (const auto& o : outputs) {
    if (o == *mode_output) continue;
    std::size_t i = 0;
    while (i < o.size() && i < mode_output->size() && o[i] == (*mode_output)[i]) ++i;
    ++r.first_divergence[static_cast<std::int64_t>(i)];
  }
  return r;
}

class Progress {
 public:
  Progress(std::string label, int total)
      : label_(std::move(label)), total_(total), enabled_(isatty(STDERR_FILENO) != 0) {}
  void tick(int done) {
    if (!enabled_) return;
    const int width = 30;
    const int filled = total_ > 0 ? done * width / total_ : width;
    std::cerr << "\r" << label_ << " [" << std::string(static_cast<std::size_t>(filled), '#')
              << std::string(static_cast<std::size_t>(width - filled), '.') << "] " << done << "/"
              << total_ << std::flush;
    if (done == total_) std::cerr << "\n";
  }

 private:
  std::string label_;
  int total_;
  bool enabled_;
};

// Runs `target` runs times while `concurrency` threads call `background(thread, i)` in a
// loop with random pauses, and returns the target outputs.
std::vector<Output> run_under_load(
    const ConsistencyOptions& o, const std::string& label, const std::function<Output()>& target,
    const std::function<void(detinfer_cli::CliRandom&)>& background) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> traffic;
  std::atomic<int> background_errors{0};
  for (int t = 0; t < o.concurrency; ++t) {
    traffic.emplace_back([&, t] {
      detinfer_cli::CliRandom rng(o.traffic_seed, static_cast<std::uint64_t>(t) + 1);
      while (!stop) {
        std::this_thread::sleep_for(std::chrono::microseconds(rng.range(0, 3000)));
        try {
          background(rng);
        } catch (const std::exception&) {
          ++background_errors;  // a full queue under load is expected; keep going
        }
      }
    });
  }
  detinfer_cli::CliRandom rng(o.traffic_seed, 0);
  std::vector<Output> outputs;
  Progress progress(label, o.runs);
  try {
    for (int i = 0; i < o.runs; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng.range(0, 2000)));
      outputs.push_back(target());
      progress.tick(i + 1);
    }
  } catch (...) {
    stop = true;
    for (auto& th : traffic) th.join();
    throw;
  }
  stop = true;
  for (auto& th : traffic) th.join();
  return outputs;
}

ModeReport run_local(const ConsistencyOptions& o, detinfer::NumericsMode mode,
                     const std::string& name) {
  detinfer::SessionOptions so = o.session;
  so.mode = mode;
  detinfer::DeterministicSession session = detinfer::DeterministicSession::open(o.model, so);
  detinfer::GenerationConfig c;
  c.max_new_tokens = o.max_new_tokens;
  c.temperature = o.temperature;
  c.seed = o.seed.value_or(0);
  c.ignore_eos = true;  // compare full-length outputs
  o.speculative.apply(c);
  const std::int64_t vocab = session.vocab_size();
  const detinfer::Prompt prompt =
      session.tokenizer() != nullptr
          ? detinfer::Prompt(o.prompt)
          : detinfer::Prompt(detinfer_cli::CliRandom(7, 7).tokens(8, vocab));
  auto target = [&]() {
    const detinfer::GenerationResult r = session.generate(prompt, c);
    const auto& toks = r.sequences.at(0).tokens;
    return Output(toks.begin(), toks.end());
  };
  auto background = [&](detinfer_cli::CliRandom& rng) {
    detinfer::GenerationConfig bc;
    bc.max_new_tokens = static_cast<std::int32_t>(rng.range(1, o.background_max_tokens));
    bc.temperature = rng.range(0, 1) == 0 ? 0.0f : 0.9f;
    bc.seed = rng.next_u32();
    session.generate(rng.tokens(rng.range(2, 48), vocab), bc);
  };
  ModeReport r = summarize(name, run_under_load(o, name, target, background));
  return r;
}

// choices[0].text (completions) or choices[0].message.content (chat); null when absent.
json choice_text(const json& j, bool chat) {
  if (j.is_discarded() || !j.contains("choices") || !j["choices"].is_array() ||
      j["choices"].empty()) {
    return nullptr;
  }
  const json& c = j["choices"][0];
  if (!chat) return c.value("text", json(nullptr));
  if (!c.contains("message") || !c["message"].is_object()) return nullptr;
  return c["message"].value("content", json(nullptr));
}

ModeReport run_url(const ConsistencyOptions& o) {
  httplib::Client client(o.url);
  client.set_connection_timeout(10, 0);
  client.set_read_timeout(300, 0);
  // --chat: the same request as one user message to /v1/chat/completions.
  const char* path = o.chat ? "/v1/chat/completions" : "/v1/completions";
  auto complete = [&](httplib::Client& cl, json body) {
    if (o.chat) {
      body["messages"] = json::array({{{"role", "user"}, {"content", body["prompt"]}}});
      body.erase("prompt");
    }
    auto res = cl.Post(path, body.dump(), "application/json");
    if (!res) {
      throw detinfer::Error(detinfer::ErrorCode::kUnavailable,
                            "cannot reach " + o.url + ": " + httplib::to_string(res.error()));
    }
    if (res->status != 200) {
      throw detinfer::Error(detinfer::ErrorCode::kUnavailable, o.url + " answered HTTP " +
                                                                   std::to_string(res->status) +
                                                                   ": " + res->body.substr(0, 300));
    }
    const json j = json::parse(res->body, nullptr, false);
    const json text = choice_text(j, o.chat);
    if (!text.is_string()) {
      throw detinfer::Error(detinfer::ErrorCode::kCorrupt,
                            o.url + " returned no choices[0]." +
                                (o.chat ? "message.content: " : "text: ") +
                                res->body.substr(0, 300));
    }
    return text.get<std::string>();
  };
  json body = {
      {"prompt", o.prompt}, {"max_tokens", o.max_new_tokens}, {"temperature", o.temperature}};
  if (o.seed) body["seed"] = *o.seed;
  detinfer::GenerationConfig spec;
  o.speculative.apply(spec);
  if (spec.draft_tokens > 0) {  // the request parameters of docs/server.md
    body["draft_tokens"] = spec.draft_tokens;
    body["draft_with_model"] = spec.draft_with_model;
  }
  auto target = [&]() {
    const std::string text = complete(client, body);
    return Output(text.begin(), text.end());
  };
  static const char* kWords[] = {"alpha",  "river", "stone", "light",  "seven", "quiet",
                                 "market", "orbit", "paper", "window", "green", "music"};
  auto background = [&](detinfer_cli::CliRandom& rng) {
    httplib::Client cl(o.url);
    cl.set_read_timeout(300, 0);
    std::string p;
    const auto words = rng.range(2, 24);
    for (int i = 0; i < words; ++i) p += std::string(i ? " " : "") + kWords[rng.range(0, 11)];
    complete(cl, json{{"prompt", p},
                      {"max_tokens", rng.range(1, o.background_max_tokens)},
                      {"temperature", 0.9},
                      {"seed", rng.next_u32()}});
  };
  ModeReport r = summarize("url", run_under_load(o, "url", target, background));
  r.unit = "byte";
  return r;
}

json to_json(const ModeReport& r) {
  json hist = json::object();
  for (const auto& [pos, n] : r.first_divergence) hist[std::to_string(pos)] = n;
  return json{{"mode", r.mode},
              {"runs", r.runs},
              {"distinct_outputs", r.distinct},
              {"most_common_count", r.most_common},
              {"first_divergence_unit", r.unit},
              {"first_divergence_histogram", hist}};
}

void print_table(const std::vector<ModeReport>& reports) {
  std::cout << std::left << std::setw(11) << "mode" << std::right << std::setw(6) << "runs"
            << std::setw(10) << "distinct" << std::setw(13) << "most_common"
            << "  first divergence (position: runs)\n";
  for (const auto& r : reports) {
    std::ostringstream hist;
    if (r.first_divergence.empty()) hist << "-";
    for (const auto& [pos, n] : r.first_divergence) {
      hist << r.unit << " " << pos << ": " << n << "  ";
    }
    std::cout << std::left << std::setw(11) << r.mode << std::right << std::setw(6) << r.runs
              << std::setw(10) << r.distinct << std::setw(13) << r.most_common << "  " << hist.str()
              << "\n";
  }
}

int run_consistency(const ConsistencyOptions& o) {
  if (o.model.empty() == o.url.empty()) {
    throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                          "give exactly one of --model DIR or --url http://HOST:PORT");
  }
  std::vector<ModeReport> reports;
  if (!o.url.empty()) {
    reports.push_back(run_url(o));
  } else {
    for (const detinfer::NumericsMode m :
         {detinfer::NumericsMode::kCanonical, detinfer::NumericsMode::kFast}) {
      if (o.mode == detinfer::to_string(m) || o.mode == "both") {
        reports.push_back(run_local(o, m, detinfer::to_string(m)));
      }
    }
  }
  if (o.json) {
    if (reports.size() == 1) {
      std::cout << to_json(reports[0]).dump(2) << "\n";
    } else {
      json all = json::array();
      for (const auto& r : reports) all.push_back(to_json(r));
      std::cout << all.dump(2) << "\n";
    }
  } else {
    print_table(reports);
  }
  return 0;
}

const detinfer_cli::RegisterCommand kRegister(
    "consistency", "Repeat one request under random concurrent load and count distinct outputs",
    [](CLI::App& sub, int& exit_code) {
      auto o = std::make_shared<ConsistencyOptions>();
      auto* model = sub.add_option("--model", o->model, "Model folder (local audit)");
      auto* url = sub.add_option("--url", o->url,
                                 "Audit an OpenAI-compatible server instead: http://HOST:PORT");
      model->excludes(url);
      sub.add_flag("--chat", o->chat,
                   "With --url: send the prompt as one user message to /v1/chat/completions");
      sub.add_option("--prompt", o->prompt, "The repeated prompt")->capture_default_str();
      sub.add_option("--runs", o->runs, "Repetitions")
          ->capture_default_str()
          ->check(CLI::Range(1, 1000000));
      sub.add_option("--max-new-tokens", o->max_new_tokens, "Tokens per repetition")
          ->capture_default_str()
          ->check(CLI::Range(1, 1000000));
      sub.add_option("--temperature", o->temperature, "0 = greedy")->capture_default_str();
      sub.add_option("--seed", o->seed, "Sampling seed of the repeated request");
      sub.add_option("--concurrency", o->concurrency, "Background request streams")
          ->capture_default_str()
          ->check(CLI::Range(0, 256));
      sub.add_option("--background-max-tokens", o->background_max_tokens,
                     "Longest background generation")
          ->capture_default_str()
          ->check(CLI::Range(1, 100000));
      sub.add_option("--mode", o->mode, "canonical, fast or both")
          ->check(CLI::IsMember({detinfer::to_string(detinfer::NumericsMode::kCanonical),
                                 detinfer::to_string(detinfer::NumericsMode::kFast), "both"}))
          ->capture_default_str();
      sub.add_option("--traffic-seed", o->traffic_seed, "Seed of the background traffic")
          ->capture_default_str();
      sub.add_flag("--json", o->json, "Machine-readable output");
      o->speculative.add(sub);
      auto flags =
          std::make_shared<detinfer_cli::SessionFlags>(sub, false, std::set<std::string>{"mode"});
      sub.callback([o, flags, &exit_code] {
        detinfer_cli::ToolConfig tc = flags->resolve();
        const auto log = detinfer_cli::attach_fingerprint_log(tc);
        o->session = tc.session;
        if (flags->print_config()) {
          if (o->model.empty()) {
            throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                                  "--print-config needs --model", "model");
          }
          flags->print(tc, detinfer::DeterministicSession::open(o->model, tc.session));
          return;
        }
        exit_code = run_consistency(*o);
      });
    });

}  // namespace
