// `detinfer`: the command-line front end. Subcommands live in cmd_*.cpp.
#include <algorithm>
#include <iostream>

#include "command_registry.h"
#include "detinfer/error.h"

namespace detinfer_cli {
std::vector<Command>& command_registry() {
  static std::vector<Command> registry;
  return registry;
}
}  // namespace detinfer_cli

int main(int argc, char** argv) {
  CLI::App app{"detinfer: bitwise-reproducible LLM inference"};
  app.require_subcommand(1);
  int exit_code = 0;
  auto& commands = detinfer_cli::command_registry();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& cmd : commands) {
    CLI::App* sub = app.add_subcommand(cmd.name, cmd.description);
    cmd.setup(*sub, exit_code);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // `verify` promises exit 2 on a usage error (1 means "diverged" there).
    return code != 0 && app.got_subcommand("verify") ? 2 : code;
  } catch (const detinfer::Error& e) {
    std::cerr << "detinfer: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "detinfer: error: " << e.what() << "\n";
    return 1;
  }
  return exit_code;
}
