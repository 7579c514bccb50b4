#include "server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <regex>
#include <thread>

extern char** environ;

namespace frugal::server::testing {

namespace {
// Reads from fd until `done(buffer)` or the deadline; returns false on timeout/EOF.
template <typename Pred>
bool read_until(int fd, std::string& buf, std::chrono::steady_clock::time_point deadline, Pred done) {
  char tmp[4096];
  while (!done(buf)) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    ssize_t n = read(fd, tmp, sizeof(tmp));
    if (n <= 0) return false;
    buf.append(tmp, static_cast<size_t>(n));
  }
  return true;
}

pid_t spawn(const std::vector<std::string>& argv, int* out_fd, bool merge_stdout) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  if (merge_stdout) posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return -1;
  }
  *out_fd = fds[0];
  return pid;
}
}  // namespace

ServerProcess::ServerProcess(std::vector<std::string> argv, std::chrono::seconds startup_timeout) {
  argv.push_back("--port");
  argv.push_back("0");
  pid_ = spawn(argv, &stderr_fd_, false);
  if (pid_ < 0) {
    error_ = "cannot start " + argv[0];
    return;
  }
  static const std::regex kListening("listening on http://127\\.0\\.0\\.1:(\\d+)");
  std::smatch m;
  bool found = read_until(stderr_fd_, log_, std::chrono::steady_clock::now() + startup_timeout,
                          [&](const std::string& b) { return std::regex_search(b, m, kListening); });
  if (!found) {
    error_ = "server did not report its address; its stderr:\n" + log_;
    stop();
    return;
  }
  port_ = static_cast<uint16_t>(std::stoi(m[1].str()));
}

ServerProcess::~ServerProcess() { stop(); }

int ServerProcess::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + grace;
  pid_t r = 0;
  while ((r = waitpid(pid_, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (r == 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    status = -1;
  }
  pid_ = -1;
  if (stderr_fd_ >= 0) close(stderr_fd_);
  stderr_fd_ = -1;
  return status;
}

CommandResult run_command(const std::string& cmd, std::chrono::seconds limit) {
  CommandResult out;
  int fd = -1;
  pid_t pid = spawn({"/bin/sh", "-c", cmd}, &fd, true);
  if (pid < 0) return out;
  auto deadline = std::chrono::steady_clock::now() + limit;
  read_until(fd, out.output, deadline, [](const std::string&) { return false; });  // to EOF
  close(fd);
  int status = 0;
  pid_t r = 0;
  while ((r = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline + std::chrono::seconds(2)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (r == 0) {  // still running: over the limit
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    out.output += "\n[killed after " + std::to_string(limit.count()) + " s]";
    return out;
  }
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace frugal::server::testing
