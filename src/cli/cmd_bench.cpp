// Placeholder for `frugal bench` until its issue lands.
#include <cstdio>

#include "cli/commands.h"

namespace frugal::cli {

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "(not yet implemented)");
  cmd->callback([] {
    std::fprintf(stderr, "frugal bench: not implemented yet\n");
    set_exit_code(2);
  });
}

}  // namespace frugal::cli
