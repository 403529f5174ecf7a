// `detinfer version`: library version, git revision and numerics spec version.
#include <iostream>

#include "command_registry.h"
#include "detinfer/environment.h"

namespace {
const detinfer_cli::RegisterCommand kRegister("version", "Print the library version",
                                              [](CLI::App& sub, int& exit_code) {
                                                sub.callback([&exit_code] {
                                                  const detinfer::EnvironmentInfo env =
                                                      detinfer::collect_environment();
                                                  std::cout << "detinfer " << env.library_version
                                                            << " (" << env.git_revision
                                                            << ", numerics spec v"
                                                            << env.numerics_spec_version << ")\n";
                                                  exit_code = 0;
                                                });
                                              });
}  // namespace
