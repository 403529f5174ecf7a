// `detinfer verify --model DIR --transcript FILE`: checks a transcript (detinfer generate
// --transcript, a server response's detinfer.transcript) without regenerating it: one
// teacher-forced prefill recomputes every step's token and digest (docs/fingerprint.md,
// "Transcripts and verification"). Exit 0 verified; 1 diverged (the step is printed); 2 on
// a usage or input error (unreadable or malformed transcript, another model or numerics).
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "command_registry.h"
#include "core/json_parse.h"
#include "detinfer/error.h"
#include "detinfer/hash.h"
#include "detinfer/session.h"
#include "verify_routes.h"

namespace {
struct VerifyOptions {
  std::string model;
  std::string transcript;
  std::int32_t threads = 0;
  std::int32_t prefill_chunk = 256;
  bool json = false;
};

constexpr std::size_t kMaxTranscriptFileBytes = std::size_t{16} << 20;

// The session the transcript was made with: its weights quantized on load when the
// transcript's weight format names a --weights value ("q8_0/qspec1" -> q8_0). A folder that
// refuses it (a GGUF file stored quantized records its own formats the same way) is opened
// with its native weights; verify() then refuses a real mismatch, naming both formats.
detinfer::DeterministicSession open_for(const std::string& model, detinfer::SessionOptions so,
                                        const detinfer::Transcript& t) {
  const std::size_t slash = t.weight_format.find("/qspec");
  if (slash != std::string::npos) {
    so.weights = t.weight_format.substr(0, slash);
    try {
      return detinfer::DeterministicSession::open(model, so);
    } catch (const detinfer::Error&) {
      so.weights = "native";
    }
  }
  return detinfer::DeterministicSession::open(model, so);
}

int run_verify(const VerifyOptions& o) {
  detinfer::VerifyResult r;
  try {
    const std::string text =
        detinfer::core::read_file_bounded(o.transcript, kMaxTranscriptFileBytes, "transcript");
    const detinfer::Transcript t = detinfer::Transcript::from_json(text);
    detinfer::SessionOptions so;
    so.threads = o.threads;
    so.prefill_chunk_tokens = o.prefill_chunk;
    // The transcript's KV format (an unknown name is refused below as another numerics).
    try {
      so.kv_dtype = detinfer::parse_kv_dtype(t.kv_dtype);
    } catch (const detinfer::Error&) {
    }
    so.recorder.level = detinfer::RecordLevel::kOff;  // a verification is not a new record
    so.cache.prefix.enabled = false;
    r = open_for(o.model, so, t).verify(t);
  } catch (const std::exception& e) {
    if (o.json) {
      std::cout << nlohmann::json{{"verified", false}, {"error", e.what()}}.dump() << "\n";
    }
    std::cerr << "detinfer verify: error: " << e.what() << "\n";
    return 2;
  }
  if (o.json) {
    std::cout << detinfer_cli::verify_result_json(r).dump() << "\n";
  } else {
    std::cout << r.message << "\n";
  }
  return r.verified ? 0 : 1;
}

const detinfer_cli::RegisterCommand kRegister(
    "verify",
    "Verify a transcript without regenerating it (exit 0 verified, 1 diverged, 2 usage or "
    "input error)",
    [](CLI::App& sub, int& exit_code) {
      auto o = std::make_shared<VerifyOptions>();
      sub.add_option("--model", o->model, "Model folder (config.json, *.safetensors) or GGUF file")
          ->required();
      sub.add_option("--transcript", o->transcript,
                     "Transcript (detinfer.transcript/1 JSON, e.g. from generate --transcript)")
          ->required();
      sub.add_option("--threads", o->threads, "Kernel threads (0 = all cores)")
          ->capture_default_str();
      sub.add_option("--prefill-chunk", o->prefill_chunk,
                     "Tokens per teacher-forced prefill step (the result does not depend on it)")
          ->capture_default_str();
      sub.add_flag("--json", o->json, "Print the result as one JSON object");
      sub.callback([o, &exit_code] { exit_code = run_verify(*o); });
    });
}  // namespace
