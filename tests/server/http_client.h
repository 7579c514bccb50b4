// Minimal blocking HTTP client for server tests (Beast, loopback only), plus a helper that
// starts the server library in-process on a free port with the fake engine and byte codec.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "byte_codec.h"
#include "fake_engine.h"
#include "server/api_server.h"

namespace frugal::server::testing {

struct HttpResult {
  int status = 0;  // 0: no response (connection closed or timed out)
  std::map<std::string, std::string> headers;
  std::string body;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

HttpResult http_request(uint16_t port, const std::string& method, const std::string& target,
                        const std::string& body = "",
                        const std::map<std::string, std::string>& headers = {});
inline HttpResult post_json(uint16_t port, const std::string& target, const nlohmann::json& body,
                            const std::map<std::string, std::string>& headers = {}) {
  return http_request(port, "POST", target, body.dump(), headers);
}

// Sends raw bytes and reads whatever comes back until the server closes or `timeout` passes.
struct RawResult {
  std::string data;
  bool closed_by_server = false;
};
RawResult raw_exchange(uint16_t port, const std::string& bytes, std::chrono::milliseconds timeout);

// The JSON payloads of "data: ..." SSE events (excluding [DONE]); sets `done` if [DONE] came.
std::vector<nlohmann::json> sse_events(const std::string& body, bool* done = nullptr);

struct TestServerOptions {
  ApiServerConfig api;
  ByteCodecConfig codec;
  FakeEngineConfig engine;
};

// Server + engine + codec in this process; stopped in the right order on destruction.
class InProcessServer {
 public:
  explicit InProcessServer(TestServerOptions opts = {});
  ~InProcessServer();
  uint16_t port() const { return server_->port(); }
  FakeEngine& engine() { return *engine_; }

 private:
  std::unique_ptr<ByteCodec> codec_;
  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<ApiServer> server_;
};

}  // namespace frugal::server::testing
