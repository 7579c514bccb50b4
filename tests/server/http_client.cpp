#include "http_client.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace frugal::server::testing {

namespace {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
}  // namespace

HttpResult http_request(uint16_t port, const std::string& method, const std::string& target,
                        const std::string& body, const std::map<std::string, std::string>& headers) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  HttpResult out;
  boost::system::error_code ec;
  stream.expires_after(std::chrono::seconds(30));
  stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  if (ec) return out;
  bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
  req.set(bhttp::field::host, "127.0.0.1");
  if (!body.empty()) req.set(bhttp::field::content_type, "application/json");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  req.keep_alive(false);
  bhttp::write(stream, req, ec);  // may fail when the server refuses early (413): read anyway
  beast::flat_buffer buf;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(64ull << 20);
  bhttp::read(stream, buf, parser, ec);
  if (ec) return out;
  auto res = parser.release();
  out.status = static_cast<int>(res.result_int());
  for (const auto& f : res) out.headers[std::string(f.name_string())] = std::string(f.value());
  out.body = res.body();
  return out;
}

RawResult raw_exchange(uint16_t port, const std::string& bytes, std::chrono::milliseconds timeout) {
  net::io_context ioc;
  tcp::socket sock(ioc);
  RawResult out;
  boost::system::error_code ec;
  sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  if (ec) return out;
  if (!bytes.empty()) net::write(sock, net::buffer(bytes), ec);  // the server may close early
  auto deadline = std::chrono::steady_clock::now() + timeout;
  sock.non_blocking(true);
  char buf[65536];
  while (std::chrono::steady_clock::now() < deadline) {
    size_t n = sock.read_some(net::buffer(buf), ec);
    if (ec == net::error::would_block) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    if (ec) {
      out.closed_by_server = true;
      break;
    }
    out.data.append(buf, n);
  }
  return out;
}

std::vector<nlohmann::json> sse_events(const std::string& body, bool* done) {
  std::vector<nlohmann::json> out;
  if (done) *done = false;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind("data: ", 0) != 0) continue;
    std::string data = ev.substr(6);
    if (data == "[DONE]") {
      if (done) *done = true;
      continue;
    }
    out.push_back(nlohmann::json::parse(data, nullptr, false));
  }
  return out;
}

InProcessServer::InProcessServer(TestServerOptions opts) {
  opts.api.http.port = 0;
  if (opts.api.served_model_name == "frugal") opts.api.served_model_name = "fake-model";
  codec_ = std::make_unique<ByteCodec>(opts.codec);
  engine_ = std::make_unique<FakeEngine>(opts.engine);
  auto s = ApiServer::start(opts.api);
  FRUGAL_CHECK_MSG(s.is_ok(), s.status().to_string());
  server_ = std::move(s).value();
  server_->set_engine(engine_.get(), codec_.get());
}

InProcessServer::~InProcessServer() {
  server_->stop();
  engine_->shutdown();
}

}  // namespace frugal::server::testing
