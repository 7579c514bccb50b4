// Placeholder for `frugal tokenize` until its issue lands.
#include <cstdio>

#include "cli/commands.h"

namespace frugal::cli {

void register_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "(not yet implemented)");
  cmd->callback([] {
    std::fprintf(stderr, "frugal tokenize: not implemented yet\n");
    set_exit_code(2);
  });
}

}  // namespace frugal::cli
