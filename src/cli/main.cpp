// frugal: run | serve | bench | tokenize | plan | eval | quantize
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "core/log.h"

namespace frugal::cli {

namespace {
int g_exit_code = 0;  // NOLINT
}

void set_exit_code(int code) { g_exit_code = code; }
int exit_code() { return g_exit_code; }

std::string default_model_dir() {
  if (const char* env = std::getenv("FRUGAL_DEFAULT_MODEL")) return env;
  return std::string(FRUGAL_SOURCE_ROOT) + "/models/stories260K";
}

}  // namespace frugal::cli

int main(int argc, char** argv) {
  CLI::App app{"frugal: run, serve, benchmark and plan LLMs on your own hardware"};
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off")->capture_default_str();
  app.parse_complete_callback([&] { frugal::init_logging(log_level); });

  frugal::cli::register_run(app);
  frugal::cli::register_tokenize(app);
  frugal::cli::register_serve(app);
  frugal::cli::register_bench(app);
  frugal::cli::register_plan(app);
  frugal::cli::register_eval(app);
  frugal::cli::register_quantize(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return frugal::cli::exit_code();
}
