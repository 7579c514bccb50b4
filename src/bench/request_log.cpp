#include "bench/request_log.h"

namespace frugal::bench {

runtime::OutputCallback RequestLog::callback(size_t i) {
  return [this, i](const runtime::RequestOutput& out) {
    const auto now = Clock::now();
    std::lock_guard<std::mutex> lk(mu_);
    RequestRecord& r = reqs_[i];
    for (size_t t = 0; t < out.tokens.size(); ++t) r.token_times.push_back(now);
    if (out.finish != runtime::FinishReason::kNone && !r.finished) {
      r.finished = true;
      r.finish = out.finish;
      if (!out.error.is_ok()) r.error = out.error.to_string();
      ++n_finished_;
    }
    cv_.notify_all();
  };
}

Status RequestLog::submit(runtime::Engine& engine, size_t i, runtime::GenerateRequest req) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    reqs_[i].submitted = Clock::now();
  }
  auto id = engine.submit(std::move(req), callback(i));
  std::lock_guard<std::mutex> lk(mu_);
  if (!id.is_ok()) {
    RequestRecord& r = reqs_[i];
    r.finished = true;
    r.finish = runtime::FinishReason::kError;
    r.error = id.status().to_string();
    ++n_finished_;
    cv_.notify_all();
    return id.status();
  }
  reqs_[i].id = *id;
  return Status::ok();
}

Status RequestLog::submit_all(runtime::Engine& engine, std::vector<runtime::GenerateRequest> reqs) {
  std::vector<runtime::Engine::Submission> batch;
  batch.reserve(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) batch.push_back({std::move(reqs[i]), callback(i)});
  {
    std::lock_guard<std::mutex> lk(mu_);
    const auto now = Clock::now();
    for (size_t i = 0; i < batch.size(); ++i) reqs_[i].submitted = now;
  }
  auto ids = engine.submit_batch(std::move(batch));
  std::lock_guard<std::mutex> lk(mu_);
  for (size_t i = 0; i < reqs.size(); ++i) {
    RequestRecord& r = reqs_[i];
    if (ids.is_ok()) {
      r.id = (*ids)[i];
      continue;
    }
    r.finished = true;
    r.finish = runtime::FinishReason::kError;
    r.error = ids.status().to_string();
    ++n_finished_;
  }
  cv_.notify_all();
  return ids.is_ok() ? Status::ok() : ids.status();
}

bool RequestLog::wait_until(const std::function<bool(const std::vector<RequestRecord>&)>& pred) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return pred(reqs_) || n_finished_ == reqs_.size(); });
  return pred(reqs_);
}

void RequestLog::wait_all_finished() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return n_finished_ == reqs_.size(); });
}

std::vector<RequestRecord> RequestLog::snapshot() const {
  std::lock_guard<std::mutex> lk(mu_);
  return reqs_;
}

}  // namespace frugal::bench
