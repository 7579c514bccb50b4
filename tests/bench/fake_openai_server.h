// A scripted stand-in for an OpenAI-compatible server: it answers GET /v1/models and replays, for
// every POST, the bytes a test scripted: a raw status line and headers, then body pieces, each
// written separately (TCP_NODELAY) after a pause, so events can be split across TCP writes and
// timed. It implements nothing of OpenAI's schema on purpose.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>

namespace frugal::bench::testing {

struct ScriptedResponse {
  std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
  std::vector<std::string> writes;
  std::chrono::milliseconds first_pause{0};  // before the first body write
  std::chrono::milliseconds pause{2};        // between body writes
};

// Chunked transfer encoding of `pieces`: one HTTP chunk per piece, plus the last chunk.
std::vector<std::string> chunked(const std::vector<std::string>& pieces);
constexpr const char* kChunkedHead =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";

class FakeOpenAiServer {
 public:
  using Handler = std::function<ScriptedResponse(const std::string& body)>;
  explicit FakeOpenAiServer(Handler handler);
  ~FakeOpenAiServer();
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> bodies();  // POST bodies received
  std::vector<std::string> authorizations();  // their Authorization headers
  int max_concurrent() const { return max_concurrent_; }

 private:
  void accept_loop();
  void serve(boost::asio::ip::tcp::socket sock);
  Handler handler_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> concurrent_{0}, max_concurrent_{0};
  std::mutex mu_;
  std::vector<std::string> bodies_, authorizations_;
  std::vector<std::thread> conns_;
  std::thread accept_thread_;
};

}  // namespace frugal::bench::testing
