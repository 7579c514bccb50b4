// frugal_test_server: the server library wired to the scripted FakeEngine and the ByteCodec.
// Test-only (never installed): lets the SDK, load and disconnect tests run without a model, and
// pins down server behaviour independently of the real engine. Prints "listening on
// http://HOST:PORT" on stderr when ready; exits on SIGINT/SIGTERM.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

#include "byte_codec.h"
#include "fake_engine.h"
#include "server/api_server.h"

int main(int argc, char** argv) {
  using namespace frugal::server;
  CLI::App app{"frugal test server (fake engine)"};
  ApiServerConfig cfg;
  cfg.http.port = 0;
  cfg.served_model_name = "fake-model";
  testing::ByteCodecConfig codec_cfg;
  testing::FakeEngineConfig eng_cfg;
  int64_t step_us = 500, idle_ms = 60000;
  app.add_option("--port", cfg.http.port);
  app.add_option("--api-key", cfg.api_key);
  app.add_option("--served-model-name", cfg.served_model_name);
  app.add_option("--chat-template", codec_cfg.chat_template, "'' | think | plain-think");
  app.add_option("--max-queue", eng_cfg.max_queue);
  app.add_option("--max-running", eng_cfg.max_running);
  app.add_option("--max-model-len", eng_cfg.max_model_len);
  app.add_option("--step-us", step_us);
  app.add_option("--idle-timeout-ms", idle_ms);
  app.add_option("--threads", cfg.http.threads);
  CLI11_PARSE(app, argc, argv);
  eng_cfg.step_time = std::chrono::microseconds(step_us);
  cfg.http.idle_timeout = std::chrono::milliseconds(idle_ms);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // every thread inherits the mask

  testing::ByteCodec codec(codec_cfg);
  testing::FakeEngine engine(eng_cfg);
  auto server = ApiServer::start(cfg);
  if (!server) {
    std::fprintf(stderr, "frugal_test_server: %s\n", server.status().to_string().c_str());
    return 1;
  }
  (*server)->set_engine(&engine, &codec);
  std::fprintf(stderr, "listening on http://%s:%u\n", cfg.http.host.c_str(), (*server)->port());
  std::fflush(stderr);
  int sig = 0;
  sigwait(&signals, &sig);
  (*server)->stop();
  engine.shutdown();
  return 0;
}
