// Registration of the frugal verbs. Each cmd_<verb>.cpp defines one register function that
// adds its subcommand to the app and sets a callback; main.cpp calls them all.
#pragma once

#include <CLI/CLI.hpp>

namespace frugal::cli {

void register_run(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_serve(CLI::App& app);
void register_bench(CLI::App& app);
void register_bench_serve(CLI::App& bench);  // cmd_bench_serve.cpp, called by register_bench
void register_plan(CLI::App& app);
void register_eval(CLI::App& app);  // cmd_eval.cpp: ppl, kld, mc, gsm8k
void register_quantize(CLI::App& app);

// Set by a subcommand callback: the process exit code.
void set_exit_code(int code);
int exit_code();

// Default model directory: models/stories260K under the source tree (or $FRUGAL_DEFAULT_MODEL).
std::string default_model_dir();

}  // namespace frugal::cli
