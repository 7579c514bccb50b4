#include "bench/serve_runner.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include <fmt/format.h>

#include "bench/stats.h"

namespace frugal::bench {

namespace {
using tcp = asio::ip::tcp;
constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);

double exp_gap(SplitMix64& rng, double rate) { return -std::log(1.0 - rng.uniform()) / rate; }

// State of one run, touched only from the event loop's thread.
class Load {
 public:
  Load(asio::io_context& ioc, const LoadOptions& o, const std::vector<BenchPrompt>& prompts,
       tcp::resolver::results_type eps)
      : ioc_(ioc), o_(o), prompts_(prompts), eps_(std::move(eps)), slot_(ioc), progress_timer_(ioc) {}

  asio::awaitable<void> issue() {
    const bool timed = o_.duration_s > 0;
    const bool paced = o_.request_rate > 0 && std::isfinite(o_.request_rate);
    SplitMix64 rng(o_.seed ^ 0x61727269766c);
    t0_ = last_end_ = Clock::now();
    const auto end = t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.duration_s));
    auto next = t0_;
    asio::steady_timer pace(ioc_);
    for (int64_t i = 0;; ++i) {
      if (timed ? Clock::now() >= end : i >= o_.num_prompts) break;
      if (paced && i > 0) {
        next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(exp_gap(rng, o_.request_rate)));
        if (timed && next >= end) break;
        pace.expires_at(next);
        co_await pace.async_wait(kNoThrow);
      }
      while (o_.max_concurrency > 0 && in_flight_ >= o_.max_concurrency) {
        slot_.expires_at(Clock::time_point::max());
        co_await slot_.async_wait(kNoThrow);
      }
      if (timed && Clock::now() >= end) break;
      ++in_flight_;
      peak_ = std::max(peak_, in_flight_);
      records_.emplace_back();
      asio::co_spawn(ioc_, one(i), asio::detached);
    }
    issuing_done_ = true;
    if (in_flight_ == 0) progress_timer_.cancel();
  }

  asio::awaitable<void> one(int64_t i) {
    const BenchPrompt& p = prompts_[static_cast<size_t>(i) % prompts_.size()];
    RequestRecord r;
    r.index = i;
    r.prompt_tokens = std::max<int64_t>(0, p.prompt_tokens);
    HttpStreamRequest req{.target = o_.target,
                          .host_header = o_.url.host + ":" + o_.url.port,
                          .body = request_body(p, o_.request).dump(),
                          .headers = o_.headers,
                          .timeout = std::chrono::milliseconds(static_cast<int64_t>(o_.timeout_s * 1000))};
    StreamReader reader(o_.request.endpoint);
    auto sent = Clock::now();
    HttpStreamResult res = co_await http_stream(eps_, std::move(req), [&](std::string_view b, Clock::time_point at) {
      reader.on_bytes(b, at);
    });
    auto end = Clock::now();
    if (res.complete) reader.on_end();
    reader.finish(sent, end, res, r);
    r.start_s = std::chrono::duration<double>(sent - t0_).count();
    r.end_s = std::chrono::duration<double>(end - t0_).count();
    last_end_ = std::max(last_end_, end);
    (r.ok ? n_ok_ : n_err_) += 1;
    out_tokens_ += r.ok ? r.output_tokens : 0;
    records_[static_cast<size_t>(i)] = std::move(r);
    --in_flight_;
    slot_.cancel_one();
    if (issuing_done_ && in_flight_ == 0) progress_timer_.cancel();
  }

  asio::awaitable<void> progress() {
    while (!(issuing_done_ && in_flight_ == 0)) {
      progress_timer_.expires_after(std::chrono::milliseconds(250));
      co_await progress_timer_.async_wait(kNoThrow);
      draw();
    }
    std::fputc('\n', stderr);
  }

  void draw() const {
    double el = std::chrono::duration<double>(Clock::now() - t0_).count();
    double frac = o_.duration_s > 0 ? std::min(1.0, el / o_.duration_s)
                                    : static_cast<double>(n_ok_ + n_err_) / static_cast<double>(std::max<int64_t>(1, o_.num_prompts));
    constexpr int kWidth = 30;
    int fill = static_cast<int>(frac * kWidth);
    std::string bar = std::string(static_cast<size_t>(fill), '#') + std::string(static_cast<size_t>(kWidth - fill), ' ');
    std::fprintf(stderr, "\r%s[%s] %3.0f%% %lld done, %lld errors, %d in flight, %.1f out tok/s, %.0f s ",
                 o_.label.empty() ? "" : (o_.label + " ").c_str(), bar.c_str(), 100 * frac,
                 static_cast<long long>(n_ok_), static_cast<long long>(n_err_), in_flight_,
                 el > 0 ? static_cast<double>(out_tokens_) / el : 0.0, el);
    std::fflush(stderr);
  }

  LoadResult result() {
    LoadResult r;
    r.wall_s = std::chrono::duration<double>(last_end_ - t0_).count();
    r.peak_concurrency = peak_;
    r.records = std::move(records_);
    return r;
  }

 private:
  asio::io_context& ioc_;
  const LoadOptions& o_;
  const std::vector<BenchPrompt>& prompts_;
  tcp::resolver::results_type eps_;
  asio::steady_timer slot_;
  asio::steady_timer progress_timer_;
  Clock::time_point t0_, last_end_;
  std::vector<RequestRecord> records_;
  int32_t in_flight_ = 0, peak_ = 0;
  int64_t n_ok_ = 0, n_err_ = 0, out_tokens_ = 0;
  bool issuing_done_ = false;
};
}  // namespace

std::vector<double> poisson_gaps(double rate, int64_t n, uint64_t seed) {
  SplitMix64 rng(seed ^ 0x61727269766c);
  std::vector<double> g;
  for (int64_t i = 0; i < n; ++i) g.push_back(exp_gap(rng, rate));
  return g;
}

Result<LoadResult> run_load(const LoadOptions& o, const std::vector<BenchPrompt>& prompts, const Tokenizer* tok) {
  if (prompts.empty()) return invalid_argument("no prompts to send");
  if (o.request_rate < 0 || std::isnan(o.request_rate)) {
    return invalid_argument("--request-rate must be > 0 or inf, got " + std::to_string(o.request_rate));
  }
  if (o.max_concurrency < 0) return invalid_argument("--max-concurrency must be >= 1 (or 0 for unlimited)");
  if (o.duration_s <= 0 && o.num_prompts < 1) return invalid_argument("--num-prompts must be >= 1 (or give --duration)");
  if (o.duration_s > 0 && !(o.request_rate > 0 && std::isfinite(o.request_rate)) && o.max_concurrency == 0) {
    return invalid_argument("--duration with --request-rate inf needs a --max-concurrency (else requests never stop coming)");
  }
  asio::io_context ioc(1);
  tcp::resolver resolver(ioc);
  boost::system::error_code ec;
  auto eps = resolver.resolve(o.url.host, o.url.port, ec);
  if (ec) return io_error("--url " + o.url.to_string() + ": cannot resolve host '" + o.url.host + "': " + ec.message());
  Load load(ioc, o, prompts, eps);
  asio::co_spawn(ioc, load.issue(), asio::detached);
  if (o.progress) asio::co_spawn(ioc, load.progress(), asio::detached);
  ioc.run();
  LoadResult r = load.result();
  if (tok) {
    for (auto& rec : r.records) count_tokens_with_tokenizer(rec, *tok);
  }
  return r;
}

}  // namespace frugal::bench
