// `detinfer replay FP.json --model DIR`: re-runs the request a run fingerprint records
// and verifies every step digest. Exit 0 only when reproduced; 1 when it ran and
// diverged; 2 when refused (model or tokenizer differ, prompt ids not recorded) or on an
// error (unreadable or malformed file, model that cannot be opened).
#include <iostream>
#include <memory>

#include "command_registry.h"
#include "detinfer/error.h"
#include "detinfer/session.h"

namespace {
struct ReplayOptions {
  std::string fingerprint;
  std::string model;
  std::int32_t threads = 0;
  std::string mode = detinfer::to_string(detinfer::NumericsMode::kCanonical);
  std::size_t index = 0;
  bool index_set = false;
  bool json = false;
};

int run_replay(const ReplayOptions& o) {
  try {
    const auto all = detinfer::load_fingerprints(o.fingerprint);
    if (all.size() > 1 && !o.index_set) {
      throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                            o.fingerprint + " holds " + std::to_string(all.size()) +
                                " fingerprints; choose one with --index N (0-based)");
    }
    if (o.index >= all.size()) {
      throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                            "--index " + std::to_string(o.index) + " is out of range: " +
                                o.fingerprint + " holds " + std::to_string(all.size()));
    }
    detinfer::SessionOptions so;
    so.mode = detinfer::parse_numerics_mode(o.mode);
    so.threads = o.threads;
    so.recorder.level = detinfer::RecordLevel::kOff;  // a replay is not a new record
    auto session = detinfer::DeterministicSession::open(o.model, so);
    const detinfer::ReplayReport r = session.replay(all[o.index]);
    if (o.json) {
      std::cout << "{\"verdict\": \"" << detinfer::to_string(r.verdict) << "\", \"diff\": "
                << (r.verdict == detinfer::ReplayVerdict::kRefused ? "null" : r.diff.to_json(-1))
                << "}\n";
      if (!r.reason.empty()) std::cerr << "reason: " << r.reason << "\n";
    } else {
      std::cout << r.to_text();
    }
    switch (r.verdict) {
      case detinfer::ReplayVerdict::kReproduced:
        return 0;
      case detinfer::ReplayVerdict::kDiverged:
        return 1;
      case detinfer::ReplayVerdict::kRefused:
        return 2;
    }
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "detinfer replay: error: " << e.what() << "\n";
    return 2;
  }
}

const detinfer_cli::RegisterCommand kRegister(
    "replay",
    "Re-run a recorded request and verify every step digest (exit 0 reproduced, 1 diverged, "
    "2 refused or error)",
    [](CLI::App& sub, int& exit_code) {
      auto o = std::make_shared<ReplayOptions>();
      sub.add_option("FP", o->fingerprint, "Fingerprint (JSON or JSON Lines)")->required();
      sub.add_option("--model", o->model, "Model folder (config.json, *.safetensors) or GGUF file")
          ->required();
      sub.add_option("--threads", o->threads, "Kernel threads (0 = all cores)")
          ->capture_default_str();
      sub.add_option("--mode", o->mode, "canonical | fast")
          ->check(CLI::IsMember({detinfer::to_string(detinfer::NumericsMode::kCanonical),
                                 detinfer::to_string(detinfer::NumericsMode::kFast)}))
          ->capture_default_str();
      auto* index = sub.add_option("--index", o->index, "Which fingerprint of a JSON Lines file");
      sub.add_flag("--json", o->json, "Print {verdict, diff} as one JSON object");
      sub.callback([o, index, &exit_code] {
        o->index_set = index->count() > 0;
        exit_code = run_replay(*o);
      });
    });
}  // namespace
