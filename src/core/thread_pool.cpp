#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace frugal {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or spin_ns have passed; returns done().
template <class Done>
bool spin_until(int64_t spin_ns, Done done) {
  if (done()) return true;
  if (spin_ns <= 0) return false;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      cpu_relax();
      if (done()) return true;
    }
    if (std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count() > spin_ns)
      return done();
  }
}

int64_t spin_ns_from_env() {
  const char* env = std::getenv("FRUGAL_SPIN_US");
  return env ? std::max<int64_t>(0, std::atoll(env)) * 1000 : 300'000;
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : spin_ns_(spin_ns_from_env()) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  // Thread 0 is the caller; workers are 1..n-1.
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_.store(true);
  }
  cv_work_.notify_all();
  for (auto& t : threads_) t.join();
}

// Sleeping and waking, without lost wake-ups: a sleeper announces itself (sleepers_ or
// caller_asleep_) before it re-checks its condition under mu_, and a waker publishes the new
// state before it reads the announcement (all sequentially consistent), so either the sleeper
// sees the state or the waker sees the sleeper and notifies under mu_.
void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto ready = [&] { return stop_.load() || generation_.load() != seen; };
    if (!spin_until(spin_ns_, ready)) {
      std::unique_lock<std::mutex> lk(mu_);
      sleepers_.fetch_add(1);
      cv_work_.wait(lk, ready);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load();
    (*job_.load())(index);
    if (pending_.fetch_sub(1) == 1 && caller_asleep_.load()) {
      std::lock_guard<std::mutex> lk(mu_);
      cv_done_.notify_one();
    }
  }
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  std::lock_guard<std::mutex> call(call_mu_);
  job_.store(&fn);
  pending_.store(n_threads_ - 1);
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lk(mu_);
    cv_work_.notify_all();
  }
  fn(0);
  auto done = [&] { return pending_.load() == 0; };
  if (!spin_until(spin_ns_, done)) {
    std::unique_lock<std::mutex> lk(mu_);
    caller_asleep_.store(true);
    cv_done_.wait(lk, done);
    caller_asleep_.store(false);
  }
  job_.store(nullptr);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t max_chunks = (n + grain - 1) / grain;
  int n_workers = static_cast<int>(std::min<int64_t>(n_threads_, max_chunks));
  if (n_workers <= 1) {
    fn(0, n);
    return;
  }
  // A few chunks per thread, claimed in order as threads free up: a thread slowed by the host
  // (another tenant, an interrupt) takes fewer, instead of the others waiting for it. The
  // chunk boundaries depend only on n, grain and the pool size, so results do not depend on
  // which thread ran what.
  const int64_t n_chunks = std::min<int64_t>(max_chunks, static_cast<int64_t>(n_workers) * kChunksPerThread);
  std::atomic<int64_t> next{0};
  run_on_all([&](int t) {
    if (t >= n_workers) return;
    for (int64_t c = next.fetch_add(1); c < n_chunks; c = next.fetch_add(1)) {
      const int64_t begin = n * c / n_chunks, end = n * (c + 1) / n_chunks;
      if (begin < end) fn(begin, end);
    }
  });
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool([] {
    const char* env = std::getenv("FRUGAL_THREADS");
    return env ? std::atoi(env) : 0;
  }());
  return pool;
}

}  // namespace frugal
