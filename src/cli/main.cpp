// frugal: run | serve | bench | tokenize | plan | eval | quantize | report
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "core/log.h"
#include "dist/launch.h"

namespace frugal::cli {

namespace {
int g_exit_code = 0;  // NOLINT
}

std::vector<std::string>& command_line_store() {
  static std::vector<std::string> v;
  return v;
}

void set_exit_code(int code) { g_exit_code = code; }
void set_command_line(int argc, char** argv) { command_line_store().assign(argv, argv + argc); }
const std::vector<std::string>& command_line() { return command_line_store(); }

void add_parallel_flags(CLI::App* cmd, ParallelArgs& p) {
  cmd->add_option("--tensor-parallel-size,--tp", p.tensor_parallel_size,
                  "split the model over N ranks (CPU: N processes over Open MPI; CUDA: one process per GPU over NCCL)")
      ->capture_default_str();
  cmd->add_option("--master-addr", p.master_addr, "rendezvous address of GPU ranks (default: MASTER_ADDR or 127.0.0.1)");
  cmd->add_option("--master-port", p.master_port, "rendezvous TCP port of GPU ranks (default: MASTER_PORT or 29500)");
  cmd->add_option("--nnodes", p.nnodes, "hosts the GPU ranks span; each runs this command with its --node-rank")
      ->capture_default_str();
  cmd->add_option("--node-rank", p.node_rank, "this host's index in [0, --nnodes) (host 0 is --master-addr)")
      ->capture_default_str();
}

Result<std::optional<int>> start_ranks(const ParallelArgs& p, const std::string& device, dist::RankEnv* env) {
  if (p.tensor_parallel_size < 1)
    return invalid_argument("--tensor-parallel-size must be >= 1, got " + std::to_string(p.tensor_parallel_size));
  FRUGAL_ASSIGN_OR_RETURN(*env, dist::rank_env_from_environment());
  if (!p.master_addr.empty()) env->master_addr = p.master_addr;
  if (p.master_port != 0) env->master_port = p.master_port;
  FRUGAL_RETURN_IF_ERROR(dist::validate(*env));
  if (p.nnodes != 1 || p.node_rank != 0) {
    FRUGAL_RETURN_IF_ERROR(dist::local_rank_envs(p.tensor_parallel_size, {.nnodes = p.nnodes, .node_rank = p.node_rank}, *env).status());
    if (p.nnodes > 1 && p.master_addr.empty() && !std::getenv("MASTER_ADDR"))
      return invalid_argument("--nnodes " + std::to_string(p.nnodes) + " needs --master-addr (host 0's address; every host passes the same)");
  }
  if (p.tensor_parallel_size == 1) return std::optional<int>();
  const bool cpu = device == "cpu" || device == "ref";
  if (!dist::is_launched_rank()) {
    FRUGAL_ASSIGN_OR_RETURN(const int rc, dist::launch_local_ranks(cpu ? dist::RankKind::kCpuMpi : dist::RankKind::kGpuNccl,
                                                                   p.tensor_parallel_size, command_line(), *env,
                                                                   {.nnodes = p.nnodes, .node_rank = p.node_rank}));
    return std::optional<int>(rc);
  }
  if (dist::launched_rank() != 0 && !std::freopen("/dev/null", "w", stdout))
    return io_error("cannot silence stdout of a rank other than 0");
  return std::optional<int>();
}
int exit_code() { return g_exit_code; }

std::string default_model_dir() {
  if (const char* env = std::getenv("FRUGAL_DEFAULT_MODEL")) return env;
  return std::string(FRUGAL_SOURCE_ROOT) + "/models/stories260K";
}

}  // namespace frugal::cli

int main(int argc, char** argv) {
  frugal::cli::set_command_line(argc, argv);
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
  frugal::cli::register_report(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return frugal::cli::exit_code();
}
