// HTTP/1.1 transport: Boost.Beast on asio with C++20 coroutines. Knows nothing about OpenAI.
//
// One coroutine per connection, each on its own strand, over a pool of io threads. Keep-alive,
// chunked Server-Sent Events with one write per flush, and limits: body size (413), header size
// (431), idle keep-alive and slow-request timeouts, a per-write timeout for slow readers, and a
// cap on open connections (503 beyond it).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "core/status.h"

namespace frugal::server {

namespace asio = boost::asio;
namespace http = boost::beast::http;

using HttpRequest = http::request<http::string_body>;
using HttpResponse = http::response<http::string_body>;

struct HttpServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: pick a free port (see HttpServer::port())
  int32_t threads = 4;   // io threads
  uint64_t body_limit = 4ull << 20;
  uint32_t header_limit = 16u << 10;
  std::chrono::milliseconds idle_timeout{60'000};   // waiting for the next request on a connection
  std::chrono::milliseconds read_timeout{30'000};   // reading one request once it has started
  std::chrono::milliseconds write_timeout{30'000};  // one write to a client that does not read
  int32_t max_connections = 4096;
};

// One client connection as a handler sees it. All calls happen on the connection's strand.
class HttpConnection {
 public:
  explicit HttpConnection(boost::beast::tcp_stream& stream, const HttpServerConfig& cfg)
      : stream_(stream), cfg_(cfg) {}

  // Writes a complete response. False when the client is gone (the connection then closes).
  // Takes an lvalue: GCC 12 miscompiles prvalue class arguments of coroutines inside co_await
  // (double destruction), so callers keep responses in named locals.
  asio::awaitable<bool> write(HttpResponse& res);
  // Starts a chunked text/event-stream response.
  asio::awaitable<bool> start_events();
  // Writes data as one chunk (one or more "data: ...\n\n" events): one flush per call.
  asio::awaitable<bool> write_events(std::string_view data);
  asio::awaitable<bool> end_events();
  // Waits until `wake` fires or is cancelled, or the client disconnects; false when the client
  // has gone away (its socket reached EOF or failed).
  asio::awaitable<bool> wait(asio::steady_timer& wake);

  bool keep_alive() const { return keep_alive_ && ok_; }
  void set_keep_alive(bool k) { keep_alive_ = k; }
  bool ok() const { return ok_; }
  asio::any_io_executor executor() { return stream_.get_executor(); }

 private:
  bool client_closed();

  boost::beast::tcp_stream& stream_;
  const HttpServerConfig& cfg_;
  bool keep_alive_ = true;
  bool ok_ = true;
  bool watch_reads_ = true;  // off once the client pipelines data while we stream
};

// Called for every complete request; must write exactly one response through `conn`.
using HttpHandler = std::function<asio::awaitable<void>(HttpRequest&, HttpConnection&)>;

class HttpServer {
 public:
  // Binds and starts the io threads; returns once it accepts connections.
  static Result<std::unique_ptr<HttpServer>> start(HttpServerConfig cfg, HttpHandler handler);
  ~HttpServer();
  uint16_t port() const { return port_; }
  int64_t open_connections() const { return open_.load(); }
  // Stops accepting, closes connections and joins the io threads. Idempotent.
  void stop();

 private:
  HttpServer(HttpServerConfig cfg, HttpHandler handler);
  asio::awaitable<void> accept_loop();
  asio::awaitable<void> session(asio::ip::tcp::socket socket);
  asio::awaitable<void> refuse(asio::ip::tcp::socket socket);
  asio::awaitable<void> linger(boost::beast::tcp_stream& stream);

  HttpServerConfig cfg_;
  HttpHandler handler_;
  asio::io_context ioc_;
  asio::ip::tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::atomic<int64_t> open_{0};
  std::atomic<bool> stopped_{false};
};

// A JSON (or plain) response with the usual headers.
HttpResponse make_response(http::status status, std::string body, bool keep_alive,
                           std::string_view content_type = "application/json");

}  // namespace frugal::server
