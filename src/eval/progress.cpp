#include "eval/progress.h"

#include <unistd.h>

#include <cstdio>

namespace frugal::eval {

Progress::Progress(std::string label, int64_t total, int enabled)
    : label_(std::move(label)), total_(total), on_(enabled < 0 ? isatty(fileno(stderr)) != 0 : enabled > 0) {
  t0_ = last_ = std::chrono::steady_clock::now();
}

Progress::~Progress() { finish(); }

void Progress::update(int64_t done) {
  if (!on_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  draw(done);
}

void Progress::draw(int64_t done) {
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const double frac = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  constexpr int kWidth = 30;
  const int fill = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(fill), '#');
  bar.resize(kWidth, '.');
  const double rate = el > 0 ? static_cast<double>(done) / el : 0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
  std::fprintf(stderr, "\r%s [%s] %lld/%lld %5.1f%%  %.1f/s  elapsed %.0fs  ETA %.0fs   ", label_.c_str(), bar.c_str(),
               static_cast<long long>(done), static_cast<long long>(total_), 100 * frac, rate, el, eta);
  std::fflush(stderr);
}

void Progress::finish() {
  if (!on_ || finished_) return;
  draw(total_);
  std::fputc('\n', stderr);
  finished_ = true;
}

}  // namespace frugal::eval
