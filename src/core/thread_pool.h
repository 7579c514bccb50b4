// A fixed pool of worker threads for data-parallel loops (the CPU backend's only parallelism).
//
// A decode step forks and joins a few hundred times (every matmul, attention, norm), a few tens
// of microseconds apart. Waking a sleeping thread through a futex costs about that much (more in
// a VM), so workers and the caller first spin on the job counter for a short while
// (FRUGAL_SPIN_US, default 300 us; 0 disables) and only then sleep on a condition variable.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace frugal {

class ThreadPool {
 public:
  // n_threads <= 0 means one per hardware thread.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  static constexpr int kChunksPerThread = 4;

  // Splits [0, n) into contiguous chunks of at least `grain` items (up to kChunksPerThread per
  // thread) and runs fn(begin, end) on the workers and the calling thread, each chunk once;
  // returns when all chunks are done.
  // Callers on different threads are serialized (one job at a time). Not reentrant: fn must not
  // call parallel_for on the same pool.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Runs fn(thread_index) once on each of size() threads.
  void run_on_all(const std::function<void(int)>& fn);

  // Process-wide pool sized from FRUGAL_THREADS or hardware_concurrency().
  static ThreadPool& global();

 private:
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> threads_;
  std::mutex call_mu_;  // one job at a time across calling threads
  std::mutex mu_;  // guards the sleeps below; the counters are atomics
  std::condition_variable cv_work_;
  std::condition_variable cv_done_;
  std::atomic<const std::function<void(int)>*> job_{nullptr};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};        // workers asleep (or about to be) on cv_work_
  std::atomic<bool> caller_asleep_{false};
  std::atomic<bool> stop_{false};
  int64_t spin_ns_;
};

}  // namespace frugal
