// A one-line progress bar with rate and ETA on stderr, drawn only when stderr is a terminal
// (quiet when piped or redirected), at most every 200 ms.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace frugal::eval {

class Progress {
 public:
  // enabled < 0: when stderr is a terminal; 0: never; > 0: always.
  Progress(std::string label, int64_t total, int enabled = -1);
  ~Progress();
  void update(int64_t done);
  void finish();

 private:
  void draw(int64_t done);
  std::string label_;
  int64_t total_;
  bool on_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point t0_, last_;
};

}  // namespace frugal::eval
