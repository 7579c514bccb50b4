#include "dist/launch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <random>

namespace frugal::dist {
namespace {

Result<std::string> self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return io_error(std::string("cannot find this executable (/proc/self/exe): ") + std::strerror(errno));
  return std::string(buf, static_cast<size_t>(n));
}

Result<std::string> find_mpirun() {
  if (const char* e = std::getenv("FRUGAL_MPIRUN"); e && *e) return std::string(e);
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = p.find(':', start);
    const std::string dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    for (const char* name : {"mpirun", "mpiexec"}) {
      const std::string f = (dir.empty() ? "." : dir) + "/" + name;
      if (::access(f.c_str(), X_OK) == 0) return f;
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return not_found("--tensor-parallel-size on the CPU runs its ranks through Open MPI, but mpirun is not on PATH "
                   "(install openmpi-bin, or set FRUGAL_MPIRUN)");
}

pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  ::execv(a[0], a.data());
  std::fprintf(stderr, "frugal: cannot start %s: %s\n", a[0], std::strerror(errno));
  std::_Exit(127);
}

// SIGINT / SIGTERM of the launching process go on to the ranks (mpirun passes them on as
// SIGTERM): `kill -INT <frugal serve --tp N>` stops the whole group, not only its launcher.
constexpr int kMaxChildren = 256;
volatile pid_t g_children[kMaxChildren];
volatile sig_atomic_t g_n_children = 0;

void forward_signal(int sig) {
  for (sig_atomic_t i = 0; i < g_n_children; ++i) ::kill(g_children[i], sig);
}

class ForwardSignals {
 public:
  ForwardSignals() {
    struct sigaction sa {};
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
  }
  ~ForwardSignals() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    g_n_children = 0;
  }
  void add(pid_t pid) {
    if (g_n_children < kMaxChildren) {
      g_children[g_n_children] = pid;
      g_n_children = g_n_children + 1;
    }
  }
  ForwardSignals(const ForwardSignals&) = delete;
  ForwardSignals& operator=(const ForwardSignals&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

bool is_launched_rank() { return started_by_mpi_launcher() || std::getenv("WORLD_SIZE") != nullptr; }

int launched_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "RANK"})
    if (const char* s = std::getenv(v); s && *s) return std::atoi(s);
  return 0;
}

uint64_t shared_seed(uint64_t fallback) {
  const char* s = std::getenv("FRUGAL_TP_SEED");
  if (!s || !*s) return fallback;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  return *end == '\0' ? static_cast<uint64_t>(v) : fallback;
}

Result<std::vector<EnvVars>> local_rank_envs(int world, Nodes nodes, const RankEnv& rv) {
  if (nodes.nnodes < 1) return invalid_argument("--nnodes must be >= 1, got " + std::to_string(nodes.nnodes));
  if (nodes.node_rank < 0 || nodes.node_rank >= nodes.nnodes)
    return invalid_argument("--node-rank " + std::to_string(nodes.node_rank) + " is not in [0, --nnodes " + std::to_string(nodes.nnodes) + ")");
  if (world < 1 || world % nodes.nnodes != 0)
    return invalid_argument("--tensor-parallel-size " + std::to_string(world) + " does not split evenly over --nnodes " +
                            std::to_string(nodes.nnodes) + " hosts");
  const int per = world / nodes.nnodes;
  std::vector<EnvVars> out;
  for (int r = 0; r < per; ++r)
    out.push_back({{"RANK", std::to_string(nodes.node_rank * per + r)}, {"WORLD_SIZE", std::to_string(world)},
                   {"LOCAL_RANK", std::to_string(r)}, {"MASTER_ADDR", rv.master_addr},
                   {"MASTER_PORT", std::to_string(rv.master_port)}});
  return out;
}

Result<int> launch_local_ranks(RankKind kind, int world, const std::vector<std::string>& args, const RankEnv& rv, Nodes nodes) {
  if (world < 2) return invalid_argument("launch: a tensor-parallel group needs at least 2 ranks");
  FRUGAL_ASSIGN_OR_RETURN(const std::vector<EnvVars> rank_envs, local_rank_envs(world, nodes, rv));
  if (kind == RankKind::kCpuMpi && nodes.nnodes > 1)
    return invalid_argument("--nnodes " + std::to_string(nodes.nnodes) +
                            ": CPU ranks on several hosts are started by Open MPI itself (mpirun --hostfile HOSTS -np " +
                            std::to_string(world) + " frugal ...), not by --nnodes");
  FRUGAL_ASSIGN_OR_RETURN(const std::string exe, self_exe());
  const std::string seed = std::to_string(std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32));
  std::vector<std::pair<std::string, std::string>> env = {{"FRUGAL_TP_SEED", seed}};
  if (kind == RankKind::kCpuMpi) {
    FRUGAL_ASSIGN_OR_RETURN(const std::string mpirun, find_mpirun());
    // Open MPI refuses to run as root unless told it is meant.
    if (::geteuid() == 0) {
      env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
      env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    // mpi_yield_when_idle: a rank waiting in a collective (a served model's ranks between
    // requests) yields its core instead of spinning on it.
    std::vector<std::string> argv = {mpirun, "--oversubscribe", "--mca", "mpi_yield_when_idle", "1", "-np", std::to_string(world),
                                     "-x", "FRUGAL_TP_SEED", exe};
    argv.insert(argv.end(), args.begin() + (args.empty() ? 0 : 1), args.end());
    ForwardSignals forward;
    const pid_t pid = spawn(argv, env);
    if (pid < 0) return io_error(std::string("fork: ") + std::strerror(errno));
    forward.add(pid);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return exit_code_of(status);
  }
  ForwardSignals forward;
  std::vector<pid_t> pids;
  std::vector<std::string> argv = {exe};
  argv.insert(argv.end(), args.begin() + (args.empty() ? 0 : 1), args.end());
  for (const EnvVars& re : rank_envs) {
    auto e = env;
    e.insert(e.end(), re.begin(), re.end());
    const pid_t pid = spawn(argv, e);
    if (pid < 0) {
      for (pid_t p : pids) ::kill(p, SIGTERM);
      return io_error(std::string("fork: ") + std::strerror(errno));
    }
    pids.push_back(pid);
    forward.add(pid);
  }
  // Wait for all; the first failure stops the others (they would wait on it in a collective).
  int rc = 0;
  for (size_t left = pids.size(); left > 0; --left) {
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, 0);
    if (done < 0) {
      if (errno == EINTR) { ++left; continue; }
      break;
    }
    const int code = exit_code_of(status);
    if (code != 0 && rc == 0) {
      rc = code;
      for (pid_t p : pids)
        if (p != done) ::kill(p, SIGTERM);
    }
  }
  return rc;
}

}  // namespace frugal::dist
