// Placeholder for `frugal serve` until its issue lands.
#include <cstdio>

#include "cli/commands.h"

namespace frugal::cli {

void register_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "(not yet implemented)");
  cmd->callback([] {
    std::fprintf(stderr, "frugal serve: not implemented yet\n");
    set_exit_code(2);
  });
}

}  // namespace frugal::cli
