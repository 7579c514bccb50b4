// Registration of the frugal verbs. Each cmd_<verb>.cpp defines one register function that
// adds its subcommand to the app and sets a callback; main.cpp calls them all.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "dist/communicator.h"

namespace frugal::cli {

void register_run(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_serve(CLI::App& app);
void register_bench(CLI::App& app);
void register_bench_serve(CLI::App& bench);  // cmd_bench_serve.cpp, called by register_bench
void register_plan(CLI::App& app);
void register_eval(CLI::App& app);  // cmd_eval.cpp: ppl, kld, mc, gsm8k
void register_quantize(CLI::App& app);
void register_report(CLI::App& app);

// The process's command line (main's argv), for verbs that start their tensor-parallel ranks
// by re-running it (dist/launch.h).
void set_command_line(int argc, char** argv);
const std::vector<std::string>& command_line();

// Tensor parallelism flags of run / bench offline / serve (docs/parallelism.md).
struct ParallelArgs {
  int32_t tensor_parallel_size = 1;
  std::string master_addr;  // default: MASTER_ADDR or 127.0.0.1
  int32_t master_port = 0;  // default: MASTER_PORT or 29500
  int32_t nnodes = 1;       // hosts the GPU ranks span (each starts tensor_parallel_size / nnodes)
  int32_t node_rank = 0;    // this host's index among them
};
void add_parallel_flags(CLI::App* cmd, ParallelArgs& p);
// Before the verb runs: with tensor_parallel_size > 1 in a process that is not yet a rank,
// starts the ranks (re-running this command line) and returns their exit code; otherwise
// returns nullopt and fills `env` (this rank's rendezvous; rank 0 of 1 without parallelism)
// and, for ranks other than 0, sends stdout to /dev/null (rank 0 writes the verb's output).
Result<std::optional<int>> start_ranks(const ParallelArgs& p, const std::string& device, dist::RankEnv* env);

// Set by a subcommand callback: the process exit code.
void set_exit_code(int code);
int exit_code();

// Default model directory: models/stories260K under the source tree (or $FRUGAL_DEFAULT_MODEL).
std::string default_model_dir();

}  // namespace frugal::cli
