#include "eval/engine_jobs.h"

#include <condition_variable>
#include <deque>
#include <mutex>

namespace frugal::eval {

Result<std::vector<EngineJobResult>> run_engine_jobs(runtime::Engine& engine, std::vector<EngineJob> jobs,
                                                     int32_t max_in_flight,
                                                     const std::function<void(int64_t)>& on_done) {
  const size_t n = jobs.size();
  std::vector<EngineJobResult> results(n);
  std::vector<std::vector<size_t>> dependents(n);
  std::deque<size_t> ready;
  for (size_t i = 0; i < n; ++i) {
    if (jobs[i].after < 0) {
      ready.push_back(i);
    } else {
      if (static_cast<size_t>(jobs[i].after) >= i)
        return internal_error("run_engine_jobs: job " + std::to_string(i) + " waits for a later job");
      dependents[static_cast<size_t>(jobs[i].after)].push_back(i);
    }
  }
  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> finished;  // filled by callbacks on the engine thread
  Status error;
  int64_t in_flight = 0, done = 0;
  const int32_t window = std::max<int32_t>(1, max_in_flight);
  std::unique_lock<std::mutex> lk(mu);
  while (done < static_cast<int64_t>(n)) {
    while (error.is_ok() && in_flight < window && !ready.empty()) {
      const size_t i = ready.front();
      ready.pop_front();
      lk.unlock();
      auto id = engine.submit(std::move(jobs[i].req), [&, i](const runtime::RequestOutput& o) {
        std::lock_guard<std::mutex> g(mu);
        EngineJobResult& r = results[i];
        for (const auto& t : o.tokens) r.tokens.push_back(t.token);
        if (!o.scored.empty()) r.scored = o.scored;
        if (o.finish == runtime::FinishReason::kNone) return;
        r.finish = o.finish;
        r.prompt_tokens = o.prompt_tokens;
        r.cached_prompt_tokens = o.cached_prompt_tokens;
        if (o.finish == runtime::FinishReason::kError && error.is_ok())
          error = o.error.with_context("request " + std::to_string(i));
        finished.push_back(i);
        cv.notify_all();
      });
      lk.lock();
      if (!id.is_ok()) {
        if (error.is_ok()) error = id.status().with_context("request " + std::to_string(i));
        break;
      }
      ++in_flight;
    }
    if (in_flight == 0) break;  // nothing runs and nothing can start: an error stopped us
    cv.wait(lk, [&] { return !finished.empty(); });
    while (!finished.empty()) {
      const size_t i = finished.front();
      finished.pop_front();
      --in_flight;
      ++done;
      for (size_t d : dependents[i]) ready.push_back(d);
    }
    if (on_done) {
      lk.unlock();
      on_done(done);
      lk.lock();
    }
  }
  if (!error.is_ok()) return error;
  return results;
}

}  // namespace frugal::eval
