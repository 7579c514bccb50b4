#include "server/http_server.h"

#include <sys/socket.h>

#include <optional>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "core/log.h"

namespace frugal::server {

namespace {
namespace beast = boost::beast;
using asio::as_tuple;
using asio::use_awaitable;
using tcp = asio::ip::tcp;
constexpr auto kNoThrow = as_tuple(use_awaitable);

std::string error_body(std::string_view message, std::string_view type, std::string_view code) {
  // Hand-written to keep the transport free of the OpenAI layer; same shape as its errors.
  std::string esc;
  for (char c : message) {
    if (c == '"' || c == '\\') esc += '\\';
    esc += c;
  }
  return "{\"error\":{\"message\":\"" + esc + "\",\"type\":\"" + std::string(type) +
         "\",\"param\":null,\"code\":\"" + std::string(code) + "\"}}";
}
}  // namespace

HttpResponse make_response(http::status status, std::string body, bool keep_alive,
                           std::string_view content_type) {
  HttpResponse res{status, 11};
  res.set(http::field::server, "frugal");
  res.set(http::field::content_type, content_type);
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

asio::awaitable<bool> HttpConnection::write(HttpResponse& res) {
  if (!ok_) co_return false;
  res.keep_alive(keep_alive());
  stream_.expires_after(cfg_.write_timeout);
  auto [ec, n] = co_await http::async_write(stream_, res, kNoThrow);
  stream_.expires_never();
  if (ec) ok_ = false;
  co_return ok_;
}

asio::awaitable<bool> HttpConnection::start_events() {
  if (!ok_) co_return false;
  http::response<http::empty_body> res{http::status::ok, 11};
  res.set(http::field::server, "frugal");
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  res.keep_alive(keep_alive());
  res.chunked(true);
  http::response_serializer<http::empty_body> sr{res};
  stream_.expires_after(cfg_.write_timeout);
  auto [ec, n] = co_await http::async_write_header(stream_, sr, kNoThrow);
  stream_.expires_never();
  if (ec) ok_ = false;
  co_return ok_;
}

asio::awaitable<bool> HttpConnection::write_events(std::string_view data) {
  if (!ok_) co_return false;
  if (data.empty()) co_return true;
  stream_.expires_after(cfg_.write_timeout);
  auto [ec, n] = co_await asio::async_write(stream_, http::make_chunk(asio::buffer(data)), kNoThrow);
  stream_.expires_never();
  if (ec) ok_ = false;
  co_return ok_;
}

asio::awaitable<bool> HttpConnection::end_events() {
  if (!ok_) co_return false;
  stream_.expires_after(cfg_.write_timeout);
  auto [ec, n] = co_await asio::async_write(stream_, http::make_chunk_last(), kNoThrow);
  stream_.expires_never();
  if (ec) ok_ = false;
  co_return ok_;
}

bool HttpConnection::client_closed() {
  char c;
  ssize_t r = ::recv(stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r > 0) {
    watch_reads_ = false;  // pipelined request bytes: leave them for the next read
    return false;
  }
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  return true;  // EOF or a socket error
}

asio::awaitable<bool> HttpConnection::wait(asio::steady_timer& wake) {
  using namespace asio::experimental::awaitable_operators;
  if (!ok_) co_return false;
  if (!watch_reads_) {
    co_await wake.async_wait(kNoThrow);
    co_return true;
  }
  auto r = co_await (wake.async_wait(kNoThrow) ||
                     stream_.socket().async_wait(tcp::socket::wait_read, kNoThrow));
  if (r.index() == 1 && client_closed()) ok_ = false;
  co_return ok_;
}

HttpServer::HttpServer(HttpServerConfig cfg, HttpHandler handler)
    : cfg_(std::move(cfg)), handler_(std::move(handler)), ioc_(cfg_.threads), acceptor_(ioc_) {}

HttpServer::~HttpServer() { stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::start(HttpServerConfig cfg, HttpHandler handler) {
  if (cfg.threads < 1) return invalid_argument("--threads must be >= 1, got " + std::to_string(cfg.threads));
  std::unique_ptr<HttpServer> s(new HttpServer(std::move(cfg), std::move(handler)));
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(s->cfg_.host, ec);
  if (ec) return invalid_argument("--host '" + s->cfg_.host + "' is not an IP address: " + ec.message());
  tcp::endpoint ep(addr, s->cfg_.port);
  s->acceptor_.open(ep.protocol(), ec);
  if (!ec) s->acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s->acceptor_.bind(ep, ec);
  if (!ec) s->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return io_error("cannot listen on " + s->cfg_.host + ":" + std::to_string(s->cfg_.port) + ": " + ec.message());
  }
  s->port_ = s->acceptor_.local_endpoint().port();
  asio::co_spawn(s->ioc_, s->accept_loop(), asio::detached);
  for (int i = 0; i < s->cfg_.threads; ++i) s->threads_.emplace_back([srv = s.get()] { srv->ioc_.run(); });
  return s;
}

void HttpServer::stop() {
  if (stopped_.exchange(true)) return;
  asio::post(acceptor_.get_executor(), [this] {
    boost::system::error_code ec;
    acceptor_.close(ec);
  });
  ioc_.stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

asio::awaitable<void> HttpServer::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(asio::make_strand(ioc_), kNoThrow);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
      FRUGAL_LOG_WARN("accept failed: {}", ec.message());
      continue;
    }
    boost::system::error_code nd;
    socket.set_option(tcp::no_delay(true), nd);
    auto exec = socket.get_executor();
    if (open_.load() >= cfg_.max_connections) {
      asio::co_spawn(exec, refuse(std::move(socket)), asio::detached);
    } else {
      asio::co_spawn(exec, session(std::move(socket)), asio::detached);
    }
  }
}

asio::awaitable<void> HttpServer::refuse(tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  auto res = make_response(http::status::service_unavailable,
                           error_body("Too many open connections.", "server_error", "too_many_connections"), false);
  stream.expires_after(cfg_.write_timeout);
  co_await http::async_write(stream, res, kNoThrow);
  boost::system::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
}

// After an error response the client may still be sending (a 413 body): close our side, then
// read and discard for a bounded time so the kernel does not answer its data with a reset that
// would destroy our response before the client reads it.
asio::awaitable<void> HttpServer::linger(beast::tcp_stream& stream) {
  boost::system::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  std::vector<char> scratch(64 << 10);
  uint64_t drained = 0;
  stream.expires_after(std::chrono::seconds(2));
  while (!ec && drained < 4 * cfg_.body_limit) {
    size_t n = 0;
    std::tie(ec, n) = co_await stream.async_read_some(asio::buffer(scratch), kNoThrow);
    drained += n;
  }
  stream.expires_never();
}

asio::awaitable<void> HttpServer::session(tcp::socket socket) {
  struct Count {
    std::atomic<int64_t>& n;
    explicit Count(std::atomic<int64_t>& c) : n(c) { ++n; }
    ~Count() { --n; }
  } count(open_);
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  HttpConnection conn(stream, cfg_);
  while (conn.keep_alive()) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(cfg_.header_limit);
    parser.body_limit(cfg_.body_limit);
    stream.expires_after(cfg_.idle_timeout);
    auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, kNoThrow);
    if (!ec && !parser.is_done()) {
      // curl and others wait (about a second) for this before sending a body.
      if (boost::beast::iequals(parser.get()[http::field::expect], "100-continue")) {
        http::response<http::empty_body> cont{http::status::continue_, 11};
        stream.expires_after(cfg_.write_timeout);
        std::tie(ec, n) = co_await http::async_write(stream, cont, kNoThrow);
      }
    }
    if (!ec && !parser.is_done()) {
      stream.expires_after(cfg_.read_timeout);
      std::tie(ec, n) = co_await http::async_read(stream, buffer, parser, kNoThrow);
    }
    stream.expires_never();
    if (ec) {
      // Say why when the client is still there to hear it; then close.
      conn.set_keep_alive(false);
      std::optional<HttpResponse> res;
      if (ec == http::error::header_limit) {
        res = make_response(http::status::request_header_fields_too_large,
            error_body("Request headers exceed " + std::to_string(cfg_.header_limit) + " bytes.",
                       "invalid_request_error", "headers_too_large"), false);
      } else if (ec == http::error::body_limit) {
        res = make_response(http::status::payload_too_large,
            error_body("Request body exceeds " + std::to_string(cfg_.body_limit) + " bytes.",
                       "invalid_request_error", "request_too_large"), false);
      } else if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
                 ec != http::error::partial_message && ec != http::error::end_of_stream) {
        res = make_response(http::status::bad_request,
            error_body("Malformed HTTP request: " + ec.message(), "invalid_request_error", "bad_http"), false);
      }
      if (res) {
        co_await conn.write(*res);
        co_await linger(stream);
      }
      break;
    }
    HttpRequest req = parser.release();
    conn.set_keep_alive(req.keep_alive());
    co_await handler_(req, conn);
  }
  boost::system::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream.socket().close(ec);
}

}  // namespace frugal::server
