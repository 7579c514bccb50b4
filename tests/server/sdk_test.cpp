// Drives a server process with the official OpenAI Node SDK (tests/oracles/node_modules/openai):
// sdk_test.mjs (API conformance), load_test.mjs (1000 concurrent streams), disconnect_test.mjs
// (50 aborted streams). Each runs against frugal_test_server (the server library + a scripted
// fake engine) and against the real `frugal serve` on the embedded model (models/stories260K,
// CPU).
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "server_process.h"
#include "test_paths.h"

namespace frugal::server::testing {
namespace {
namespace fs = std::filesystem;
using frugal::testing::binary_dir;
using frugal::testing::source_root;

constexpr const char* kApiKey = "test-key-123";

void ensure_oracles() {
  if (fs::exists(source_root() + "/tests/oracles/node_modules/openai/package.json")) return;
  CommandResult r = run_command("bash " + source_root() + "/tests/oracles/setup.sh", std::chrono::seconds(300));
  ASSERT_EQ(r.status, 0) << r.output;
}

std::vector<std::string> fake_server_argv(std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {binary_dir() + "/tests/server/frugal_test_server", "--served-model-name", "fake-model"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

void run_node(const std::string& script, const ServerProcess& server, const std::string& model, const std::string& key,
              std::chrono::seconds limit) {
  std::string cmd = "node " + source_root() + "/tests/server/" + script + " " + server.base_url() + " " + model + " " +
                    (key.empty() ? "''" : key);
  CommandResult r = run_command(cmd, limit);
  EXPECT_EQ(r.status, 0) << r.output;
  std::printf("%s\n", r.output.c_str());
}

TEST(ServerSdk, FakeEngineConformance) {
  ensure_oracles();
  ServerProcess server(fake_server_argv({"--api-key", kApiKey}), std::chrono::seconds(30));
  ASSERT_TRUE(server.ok()) << server.error();
  run_node("sdk_test.mjs", server, "fake-model", kApiKey, std::chrono::seconds(120));
}

TEST(ServerSdk, FakeEngineLoad1000Streams) {
  ensure_oracles();
  ServerProcess server(fake_server_argv({"--step-us", "2000"}), std::chrono::seconds(30));
  ASSERT_TRUE(server.ok()) << server.error();
  run_node("load_test.mjs", server, "fake-model", "", std::chrono::seconds(240));
}

TEST(ServerSdk, FakeEngineDisconnects) {
  ensure_oracles();
  ServerProcess server(fake_server_argv({"--step-us", "5000"}), std::chrono::seconds(30));
  ASSERT_TRUE(server.ok()) << server.error();
  run_node("disconnect_test.mjs", server, "fake-model", "", std::chrono::seconds(120));
}

std::vector<std::string> frugal_serve_argv(std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {frugal::testing::frugal_binary(), "serve", "--model",
                                   source_root() + "/models/stories260K", "--served-model-name", "stories260K",
                                   "--device", "cpu", "--threads", "2"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

TEST(ServerSdk, FrugalServeConformance) {
  ensure_oracles();
  ServerProcess server(frugal_serve_argv({"--api-key", kApiKey}), std::chrono::seconds(120));
  ASSERT_TRUE(server.ok()) << server.error();
  run_node("sdk_test.mjs", server, "stories260K", kApiKey, std::chrono::seconds(300));
}

TEST(ServerSdk, FrugalServeLoad1000Streams) {
  ensure_oracles();
  ServerProcess server(frugal_serve_argv(), std::chrono::seconds(120));
  ASSERT_TRUE(server.ok()) << server.error();
  run_node("load_test.mjs", server, "stories260K", "", std::chrono::seconds(400));
}

TEST(ServerSdk, FrugalServeDisconnects) {
  ensure_oracles();
  ServerProcess server(frugal_serve_argv(), std::chrono::seconds(120));
  ASSERT_TRUE(server.ok()) << server.error();
  run_node("disconnect_test.mjs", server, "stories260K", "", std::chrono::seconds(300));
}

}  // namespace
}  // namespace frugal::server::testing
