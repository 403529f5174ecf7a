// `detinfer diff A.json B.json`: compares two run fingerprints. Exit 0 when the same
// request produced the same output (or, with --strict, when every group is equal too),
// 1 when they differ, 2 on an error (unreadable file, malformed or unsupported JSON).
#include <iostream>
#include <memory>

#include "command_registry.h"
#include "detinfer/error.h"
#include "detinfer/fingerprint_diff.h"

namespace {
struct DiffOptions {
  std::string a;
  std::string b;
  bool json = false;
  bool strict = false;
  std::size_t index_a = 0;
  std::size_t index_b = 0;
  bool index_a_set = false;
  bool index_b_set = false;
};

detinfer::RunFingerprint pick(const std::string& path, std::size_t index, bool index_set,
                              const char* option) {
  const auto all = detinfer::load_fingerprints(path);
  if (all.size() > 1 && !index_set) {
    throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                          path + " holds " + std::to_string(all.size()) +
                              " fingerprints; choose one with " + option + " N (0-based)");
  }
  if (index >= all.size()) {
    throw detinfer::Error(detinfer::ErrorCode::kInvalidArgument,
                          std::string(option) + " " + std::to_string(index) +
                              " is out of range: " + path + " holds " + std::to_string(all.size()));
  }
  return all[index];
}

int run_diff(const DiffOptions& o) {
  try {
    const auto a = pick(o.a, o.index_a, o.index_a_set, "--index-a");
    const auto b = pick(o.b, o.index_b, o.index_b_set, "--index-b");
    const detinfer::FingerprintDiff d = detinfer::diff(a, b);
    std::cout << (o.json ? d.to_json(2) + "\n" : d.to_text());
    const bool same = o.strict ? d.identical() : d.reproduced();
    return same ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "detinfer diff: error: " << e.what() << "\n";
    return 2;
  }
}

const detinfer_cli::RegisterCommand kRegister(
    "diff", "Compare two run fingerprints (exit 0 same, 1 different, 2 error)",
    [](CLI::App& sub, int& exit_code) {
      auto o = std::make_shared<DiffOptions>();
      sub.add_option("A", o->a, "First fingerprint (JSON or JSON Lines)")->required();
      sub.add_option("B", o->b, "Second fingerprint (JSON or JSON Lines)")->required();
      sub.add_flag("--json", o->json, "Print the diff as one JSON object");
      sub.add_flag("--strict", o->strict,
                   "Exit 0 only when every group is equal too (library, device, environment, "
                   "numerics), not just the request and its output");
      auto* ia = sub.add_option("--index-a", o->index_a, "Which fingerprint of A (JSON Lines)");
      auto* ib = sub.add_option("--index-b", o->index_b, "Which fingerprint of B (JSON Lines)");
      sub.callback([o, ia, ib, &exit_code] {
        o->index_a_set = ia->count() > 0;
        o->index_b_set = ib->count() > 0;
        exit_code = run_diff(*o);
      });
    });
}  // namespace
