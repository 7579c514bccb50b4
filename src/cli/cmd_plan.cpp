// Placeholder for `frugal plan` until its issue lands.
#include <cstdio>

#include "cli/commands.h"

namespace frugal::cli {

void register_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "(not yet implemented)");
  cmd->callback([] {
    std::fprintf(stderr, "frugal plan: not implemented yet\n");
    set_exit_code(2);
  });
}

}  // namespace frugal::cli
