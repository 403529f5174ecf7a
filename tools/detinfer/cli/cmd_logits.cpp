// `detinfer logits`: one prefill over the given tokens; writes float32 logits [T, vocab]
// (little-endian) to --out and a JSON sidecar (--out + ".json").
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command_registry.h"
#include "detinfer/error.h"
#include "detinfer/numerics.h"
#include "devtools/model_tools.h"

namespace {
struct LogitsOptions {
  std::string model;
  std::string tokens;
  std::string mode = detinfer::to_string(detinfer::NumericsMode::kCanonical);
  int threads = 1;
  std::string out;
};

std::vector<std::int32_t> parse_tokens(const std::string& s) {
  std::vector<std::int32_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || v < 0 || v > 0x7fffffff) {
      throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                            "--tokens: '" + item + "' is not a token id");
    }
    out.push_back(static_cast<std::int32_t>(v));
  }
  return out;
}

void write_le_floats(std::ofstream& out, const std::vector<float>& v) {
  std::vector<unsigned char> bytes(v.size() * 4);
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint32_t u = 0;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<unsigned char>(u >> (8 * b));
  }
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void run(const LogitsOptions& o) {
  detinfer::devtools::LogitsRequest req;
  req.model_dir = o.model;
  req.tokens = parse_tokens(o.tokens);
  req.mode = detinfer::parse_numerics_mode(o.mode);
  req.threads = o.threads;
  const detinfer::devtools::LogitsResult r = detinfer::devtools::compute_logits(req);
  std::ofstream out(o.out, std::ios::binary | std::ios::trunc);
  write_le_floats(out, r.logits);
  if (!out) throw detinfer::Error(detinfer::ErrorCode::kUnavailable, "cannot write " + o.out);
  const nlohmann::json side = {{"shape", {r.num_tokens, r.vocab_size}},
                               {"dtype", "float32"},
                               {"byte_order", "little"},
                               {"mode", o.mode},
                               {"threads", o.threads},
                               {"tokens", req.tokens},
                               {"model_fingerprint", r.model_fingerprint}};
  std::ofstream js(o.out + ".json", std::ios::trunc);
  js << side.dump(2) << "\n";
  if (!js)
    throw detinfer::Error(detinfer::ErrorCode::kUnavailable, "cannot write " + o.out + ".json");
}

const detinfer_cli::RegisterCommand kRegister(
    "logits", "Write the float32 logits of every position of a prompt",
    [](CLI::App& sub, int& exit_code) {
      auto o = std::make_shared<LogitsOptions>();
      sub.add_option("--model", o->model, "Model folder or GGUF file")->required();
      sub.add_option("--tokens", o->tokens, "Comma-separated token ids, e.g. 1,2,3")->required();
      sub.add_option("--mode", o->mode, "canonical | fast")
          ->check(CLI::IsMember({detinfer::to_string(detinfer::NumericsMode::kCanonical),
                                 detinfer::to_string(detinfer::NumericsMode::kFast)}))
          ->capture_default_str();
      sub.add_option("--threads", o->threads, "Kernel threads")
          ->check(CLI::Range(1, 1024))
          ->capture_default_str();
      sub.add_option("--out", o->out, "Output file (float32 LE [T, vocab]); sidecar OUT.json")
          ->required();
      sub.callback([o, &exit_code] {
        run(*o);
        exit_code = 0;
      });
    });
}  // namespace
