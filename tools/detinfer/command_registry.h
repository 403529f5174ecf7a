// Subcommands of the `detinfer` program register themselves here at static
// initialization time (the files are compiled into the executable, so nothing is
// dropped by the linker).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace detinfer_cli {

struct Command {
  std::string name;
  std::string description;
  // Adds options to `sub` and sets its callback. The callback returns the exit code
  // through `exit_code`.
  std::function<void(CLI::App& sub, int& exit_code)> setup;
};

std::vector<Command>& command_registry();

struct RegisterCommand {
  RegisterCommand(std::string name, std::string description,
                  std::function<void(CLI::App&, int&)> setup) {
    command_registry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

}  // namespace detinfer_cli
