// Transport for `frugal bench serve`: URL parsing, a Server-Sent Events parser and a streaming
// HTTP/1.1 client (Boost.Beast, coroutines). Knows nothing about OpenAI's schema: the caller gets
// every SSE event's data with the time its bytes arrived.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include <boost/asio.hpp>

#include "core/status.h"

namespace frugal::bench {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// http://host[:port][/path]. `path` has no trailing '/' ("" or "/v1").
struct Url {
  std::string host;
  std::string port = "80";
  std::string path;
  std::string to_string() const { return "http://" + host + ":" + port + path; }
};
Result<Url> parse_url(const std::string& url);

// Joins a base URL path and an endpoint: ("/v1", "/v1/completions") -> "/v1/completions",
// ("", "/v1/completions") -> "/v1/completions", ("/proxy", "/v1/models") -> "/proxy/v1/models".
std::string join_target(const std::string& base_path, const std::string& endpoint);

// Incremental SSE parser (WHATWG "event stream" rules, the subset OpenAI servers use): lines end
// in \n, \r\n or \r; "data:" lines of one event are joined with \n; an event ends at a blank
// line; lines starting with ':' are comments (keep-alive pings); other fields are ignored.
class SseParser {
 public:
  using EventFn = std::function<void(const std::string& data)>;
  // Feeds bytes in any split (an event may span several calls); calls on_event per event.
  void feed(std::string_view bytes, const EventFn& on_event);
  // The stream ended: an event without its closing blank line is discarded (as the spec says;
  // a stream cut there is then reported as incomplete, not misread).
  void finish();
  int64_t comments() const { return comments_; }

 private:
  void line(std::string_view l, const EventFn& on_event);
  std::string pending_;  // bytes of an unfinished line
  bool skip_lf_ = false;  // the last byte was '\r': a following '\n' belongs to it
  std::string data_;
  bool has_data_ = false;
  int64_t comments_ = 0;
};

// How one HTTP exchange ended on the transport level.
enum class TransportError { kNone, kConnect, kTimeout, kRead, kWrite };
const char* transport_error_name(TransportError e);

struct HttpStreamResult {
  TransportError error = TransportError::kNone;
  std::string error_message;
  int status = 0;             // HTTP status (0: none received)
  std::string server_header;  // "Server:" of the response
  std::string error_body;     // body of a non-2xx response (first 64 KiB)
  bool complete = false;      // the body ended as the framing said (chunked end / length / EOF)
};

struct HttpStreamRequest {
  std::string method = "POST";
  std::string target;  // "/v1/completions"
  std::string host_header;
  std::string body;
  std::map<std::string, std::string> headers;
  std::chrono::milliseconds timeout{600000};  // whole exchange
};

// Sends one request on a new connection and hands every piece of a 2xx body to on_data as it
// arrives (time = when the read completed). Never throws.
using BodyFn = std::function<void(std::string_view bytes, Clock::time_point at)>;
asio::awaitable<HttpStreamResult> http_stream(asio::ip::tcp::resolver::results_type endpoints,
                                              HttpStreamRequest req, BodyFn on_data);

// Blocking convenience for small requests (GET /v1/models): the whole body.
struct HttpSimpleResult {
  HttpStreamResult r;
  std::string body;
};
HttpSimpleResult http_simple(const Url& url, HttpStreamRequest req);

}  // namespace frugal::bench
