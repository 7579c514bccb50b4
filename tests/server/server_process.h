// Starts a server binary (frugal_test_server or `frugal serve`) on a free loopback port, waits
// for its "listening on http://..." line on stderr (bounded), and always kills it at the end.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace frugal::server::testing {

class ServerProcess {
 public:
  // argv[0] is the binary; "--port 0" is added. Check ok() / error().
  ServerProcess(std::vector<std::string> argv, std::chrono::seconds startup_timeout);
  ~ServerProcess();
  bool ok() const { return port_ != 0; }
  const std::string& error() const { return error_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  uint16_t port() const { return port_; }
  // SIGTERM, then SIGKILL after `grace`; returns the exit status (or -1).
  int stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

 private:
  int pid_ = -1;
  int stderr_fd_ = -1;
  uint16_t port_ = 0;
  std::string error_;
  std::string log_;
};

// Runs a command through /bin/sh with a time limit; returns its exit status and output.
struct CommandResult {
  int status = -1;
  std::string output;
};
CommandResult run_command(const std::string& cmd, std::chrono::seconds limit);

}  // namespace frugal::server::testing
