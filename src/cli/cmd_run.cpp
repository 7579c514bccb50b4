// Placeholder for `frugal run` until its issue lands.
#include <cstdio>

#include "cli/commands.h"

namespace frugal::cli {

void register_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "(not yet implemented)");
  cmd->callback([] {
    std::fprintf(stderr, "frugal run: not implemented yet\n");
    set_exit_code(2);
  });
}

}  // namespace frugal::cli
