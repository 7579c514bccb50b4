#include "bench/serve_http.h"

#include <algorithm>
#include <array>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace frugal::bench {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

Result<Url> parse_url(const std::string& url) {
  const std::string kHttp = "http://";
  if (url.rfind("https://", 0) == 0) {
    return invalid_argument("--url '" + url + "': https is not supported (use http://, e.g. through a local proxy)");
  }
  if (url.rfind(kHttp, 0) != 0) return invalid_argument("--url '" + url + "': expected http://host[:port][/path]");
  std::string rest = url.substr(kHttp.size());
  Url u;
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  u.path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!u.path.empty() && u.path.back() == '/') u.path.pop_back();
  if (authority.empty()) return invalid_argument("--url '" + url + "': no host");
  size_t colon = authority.rfind(':');
  if (authority.front() == '[') {  // [::1]:8000
    size_t close = authority.find(']');
    if (close == std::string::npos) return invalid_argument("--url '" + url + "': unterminated IPv6 address");
    u.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return invalid_argument("--url '" + url + "': expected ':' after ']'");
      u.port = authority.substr(close + 2);
    }
  } else if (colon != std::string::npos) {
    u.host = authority.substr(0, colon);
    u.port = authority.substr(colon + 1);
  } else {
    u.host = authority;
  }
  if (u.host.empty()) return invalid_argument("--url '" + url + "': no host");
  if (u.port.empty() || !std::all_of(u.port.begin(), u.port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stol(u.port) < 1 || std::stol(u.port) > 65535) {
    return invalid_argument("--url '" + url + "': port '" + u.port + "' is not a number in 1..65535");
  }
  return u;
}

std::string join_target(const std::string& base_path, const std::string& endpoint) {
  std::string ep = endpoint.empty() || endpoint.front() == '/' ? endpoint : "/" + endpoint;
  const std::string v1 = "/v1";
  bool base_v1 = base_path.size() >= v1.size() && base_path.compare(base_path.size() - v1.size(), v1.size(), v1) == 0;
  if (base_v1 && ep.rfind("/v1/", 0) == 0) return base_path + ep.substr(v1.size());
  return base_path + ep;
}

void SseParser::line(std::string_view l, const EventFn& on_event) {
  if (l.empty()) {
    if (has_data_) on_event(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  if (l.front() == ':') {
    ++comments_;
    return;
  }
  size_t colon = l.find(':');
  std::string_view field = l.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : l.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (has_data_) data_ += '\n';
    data_.append(value);
    has_data_ = true;
  }
}

void SseParser::feed(std::string_view bytes, const EventFn& on_event) {
  for (char c : bytes) {
    if (skip_lf_) {
      skip_lf_ = false;
      if (c == '\n') continue;
    }
    if (c == '\n' || c == '\r') {
      line(pending_, on_event);
      pending_.clear();
      skip_lf_ = c == '\r';
    } else {
      pending_ += c;
    }
  }
}

void SseParser::finish() {
  pending_.clear();
  data_.clear();
  has_data_ = false;
}

const char* transport_error_name(TransportError e) {
  switch (e) {
    case TransportError::kNone: return "none";
    case TransportError::kConnect: return "connect";
    case TransportError::kTimeout: return "timeout";
    case TransportError::kRead: return "read";
    case TransportError::kWrite: return "write";
  }
  return "unknown";
}

namespace {
constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);
constexpr size_t kErrorBodyLimit = 64 * 1024;

TransportError classify(const boost::system::error_code& ec, TransportError otherwise) {
  return ec == beast::error::timeout ? TransportError::kTimeout : otherwise;
}
}  // namespace

asio::awaitable<HttpStreamResult> http_stream(tcp::resolver::results_type endpoints, HttpStreamRequest req,
                                              BodyFn on_data) {
  HttpStreamResult out;
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  const auto deadline = Clock::now() + req.timeout;
  auto arm = [&] { stream.expires_at(deadline); };
  arm();
  auto [cec, ep] = co_await stream.async_connect(endpoints, kNoThrow);
  if (cec) {
    out.error = classify(cec, TransportError::kConnect);
    out.error_message = "cannot connect to " + req.host_header + ": " + cec.message();
    co_return out;
  }
  stream.socket().set_option(tcp::no_delay(true));
  http::request<http::string_body> hreq{req.method == "GET" ? http::verb::get : http::verb::post, req.target, 11};
  hreq.set(http::field::host, req.host_header);
  hreq.set(http::field::user_agent, "frugal-bench-serve");
  for (const auto& [k, v] : req.headers) hreq.set(k, v);
  hreq.keep_alive(false);
  if (req.method != "GET") {
    hreq.set(http::field::content_type, "application/json");
    hreq.body() = std::move(req.body);
    hreq.prepare_payload();
  }
  arm();
  auto [wec, wn] = co_await http::async_write(stream, hreq, kNoThrow);
  if (wec) {
    out.error = classify(wec, TransportError::kWrite);
    out.error_message = "sending the request: " + wec.message();
    co_return out;
  }
  beast::flat_buffer buf;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  arm();
  auto [hec, hn] = co_await http::async_read_header(stream, buf, parser, kNoThrow);
  if (hec) {
    out.error = classify(hec, TransportError::kRead);
    out.error_message = "reading the response header: " + hec.message();
    co_return out;
  }
  out.status = static_cast<int>(parser.get().result_int());
  if (auto it = parser.get().find(http::field::server); it != parser.get().end()) out.server_header = std::string(it->value());
  const bool ok_status = out.status >= 200 && out.status < 300;
  std::array<char, 16384> chunk{};
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    arm();
    auto [rec, rn] = co_await http::async_read_some(stream, buf, parser, kNoThrow);
    auto at = Clock::now();
    if (rec == http::error::need_buffer) rec = {};
    size_t got = chunk.size() - parser.get().body().size;
    if (got > 0) {
      if (ok_status) {
        on_data(std::string_view(chunk.data(), got), at);
      } else if (out.error_body.size() < kErrorBodyLimit) {
        out.error_body.append(chunk.data(), std::min(got, kErrorBodyLimit - out.error_body.size()));
      }
    }
    if (rec) {
      out.error = classify(rec, TransportError::kRead);
      out.error_message = "reading the response body: " + rec.message();
      co_return out;
    }
  }
  out.complete = true;
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  co_return out;
}

HttpSimpleResult http_simple(const Url& url, HttpStreamRequest req) {
  asio::io_context ioc;
  HttpSimpleResult res;
  tcp::resolver resolver(ioc);
  boost::system::error_code ec;
  auto eps = resolver.resolve(url.host, url.port, ec);
  if (ec) {
    res.r.error = TransportError::kConnect;
    res.r.error_message = "cannot resolve host '" + url.host + "': " + ec.message();
    return res;
  }
  if (req.host_header.empty()) req.host_header = url.host + ":" + url.port;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        res.r = co_await http_stream(eps, req, [&](std::string_view b, Clock::time_point) { res.body.append(b); });
      },
      asio::detached);
  ioc.run();
  if (res.body.empty()) res.body = res.r.error_body;
  return res;
}

}  // namespace frugal::bench
