// `detinfer env`: the build and machine facts that run fingerprints record.
#include <iostream>
#include <nlohmann/json.hpp>

#include "command_registry.h"
#include "detinfer/environment.h"
#include "detinfer/fingerprint.h"

namespace {
struct EnvOptions {
  bool json = false;
};

void print_env(const EnvOptions& opts) {
  const detinfer::EnvironmentInfo e = detinfer::collect_environment();
  // The relevant environment variables a fingerprint records (environment.env_vars), e.g.
  // DETINFER_PACKAGES in a deploy/ image.
  const std::map<std::string, std::string> vars = detinfer::relevant_env_vars();
  std::string flags;
  for (const auto& f : e.cpu_flags) flags += (flags.empty() ? "" : " ") + f;
  if (opts.json) {
    nlohmann::json j = {{"library_version", e.library_version},
                        {"git_revision", e.git_revision},
                        {"compiler", e.compiler},
                        {"build_type", e.build_type},
                        {"build_flags", e.build_flags},
                        {"numerics_spec_version", e.numerics_spec_version},
                        {"cpu_model", e.cpu_model},
                        {"cpu_flags", e.cpu_flags},
                        {"hardware_threads", e.hardware_threads},
                        {"libtorch_version", e.libtorch_version},
                        {"glibc_version", e.glibc_version},
                        {"os", e.os},
                        {"cuda_compiled", e.cuda_compiled},
                        {"env_vars", vars}};
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "library_version:       " << e.library_version << "\n"
            << "git_revision:          " << e.git_revision << "\n"
            << "compiler:              " << e.compiler << "\n"
            << "build_type:            " << e.build_type << "\n"
            << "build_flags:           " << e.build_flags << "\n"
            << "numerics_spec_version: " << e.numerics_spec_version << "\n"
            << "cpu_model:             " << e.cpu_model << "\n"
            << "cpu_flags:             " << flags << "\n"
            << "hardware_threads:      " << e.hardware_threads << "\n"
            << "libtorch_version:      " << e.libtorch_version << "\n"
            << "glibc_version:         " << e.glibc_version << "\n"
            << "os:                    " << e.os << "\n"
            << "cuda_compiled:         " << (e.cuda_compiled ? "yes" : "no") << "\n";
  for (const auto& [name, value] : vars) std::cout << "env " << name << "=" << value << "\n";
}

const detinfer_cli::RegisterCommand kRegister("env", "Print the library and environment report",
                                              [](CLI::App& sub, int& exit_code) {
                                                auto opts = std::make_shared<EnvOptions>();
                                                sub.add_flag("--json", opts->json,
                                                             "Print one JSON object");
                                                sub.callback([opts, &exit_code] {
                                                  print_env(*opts);
                                                  exit_code = 0;
                                                });
                                              });
}  // namespace
