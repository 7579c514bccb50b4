#include "fake_openai_server.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <cstdio>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace frugal::bench::testing {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

std::vector<std::string> chunked(const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  for (const auto& p : pieces) {
    char size[32];
    std::snprintf(size, sizeof(size), "%zx\r\n", p.size());
    out.push_back(size + p + "\r\n");
  }
  out.push_back("0\r\n\r\n");
  return out;
}

FakeOpenAiServer::FakeOpenAiServer(Handler handler) : handler_(std::move(handler)), acceptor_(ioc_) {
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
  acceptor_.open(ep.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(ep);
  acceptor_.listen();
  port_ = acceptor_.local_endpoint().port();
  accept_thread_ = std::thread([this] { accept_loop(); });
}

FakeOpenAiServer::~FakeOpenAiServer() {
  stop_ = true;
  try {  // wake the blocking accept
    asio::io_context ioc;
    tcp::socket s(ioc);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_));
  } catch (...) {
  }
  accept_thread_.join();
  for (auto& t : conns_) t.join();
}

std::vector<std::string> FakeOpenAiServer::bodies() {
  std::lock_guard<std::mutex> lk(mu_);
  return bodies_;
}

std::vector<std::string> FakeOpenAiServer::authorizations() {
  std::lock_guard<std::mutex> lk(mu_);
  return authorizations_;
}

void FakeOpenAiServer::accept_loop() {
  while (!stop_) {
    boost::system::error_code ec;
    tcp::socket sock(ioc_);
    acceptor_.accept(sock, ec);
    if (ec || stop_) break;
    conns_.emplace_back([this, s = std::move(sock)]() mutable { serve(std::move(s)); });
  }
}

void FakeOpenAiServer::serve(tcp::socket sock) {
  int now = ++concurrent_;
  int prev = max_concurrent_.load();
  while (now > prev && !max_concurrent_.compare_exchange_weak(prev, now)) {
  }
  boost::system::error_code ec;
  sock.set_option(tcp::no_delay(true), ec);
  boost::beast::flat_buffer buf;
  http::request<http::string_body> req;
  http::read(sock, buf, req, ec);
  if (!ec) {
    if (req.method() == http::verb::get) {
      std::string body = R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})";
      std::string res = "HTTP/1.1 200 OK\r\nServer: fake-openai\r\nContent-Type: application/json\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      asio::write(sock, asio::buffer(res), ec);
    } else {
      {
        std::lock_guard<std::mutex> lk(mu_);
        bodies_.push_back(req.body());
        authorizations_.emplace_back(req[http::field::authorization]);
      }
      ScriptedResponse r = handler_(req.body());
      asio::write(sock, asio::buffer(r.head), ec);
      std::this_thread::sleep_for(r.first_pause);
      for (size_t i = 0; i < r.writes.size() && !ec; ++i) {
        if (i > 0) std::this_thread::sleep_for(r.pause);
        asio::write(sock, asio::buffer(r.writes[i]), ec);
      }
    }
  }
  --concurrent_;  // before the EOF that lets the client finish
  sock.shutdown(tcp::socket::shutdown_send, ec);
  // Let the client read to EOF before the socket goes away (bounded).
  timeval tv{.tv_sec = 5, .tv_usec = 0};
  setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char c;
  (void)::recv(sock.native_handle(), &c, 1, 0);
  sock.close(ec);
}

}  // namespace frugal::bench::testing
