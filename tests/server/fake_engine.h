// A scripted runtime::Engine for server tests: one engine thread, one token per running request
// per step, real KV block accounting (blocks = ceil(tokens / block_size)), a bounded queue, and
// outputs taken from a script instead of a model. Obeys the engine contract the server relies
// on: callbacks on the engine thread, cancel frees blocks within one step, a final output with
// kCancelled for cancelled requests.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "runtime/engine.h"

namespace frugal::server::testing {

// The tokens a request generates, in order; the engine stops with kStop after the last one
// (as if the model then produced EOS) or with kLength at max_tokens.
using Script = std::function<std::vector<int32_t>(const runtime::GenerateRequest&)>;

struct FakeEngineConfig {
  int32_t max_model_len = 512;
  int32_t vocab_size = 261;
  int32_t block_size = 16;
  int32_t n_blocks = 8192;
  int32_t max_running = 256;
  int32_t max_queue = 4096;
  std::chrono::microseconds step_time{500};
  Script script;
};

class FakeEngine : public runtime::Engine {
 public:
  explicit FakeEngine(FakeEngineConfig cfg);
  ~FakeEngine() override;
  Result<uint64_t> submit(runtime::GenerateRequest req, runtime::OutputCallback cb) override;
  Result<std::vector<uint64_t>> submit_batch(std::vector<Submission> batch) override;
  void cancel(uint64_t request_id) override;
  runtime::EngineStats stats() const override;
  runtime::MemoryReport memory() const override { return {}; }
  int32_t max_model_len() const override { return cfg_.max_model_len; }
  int32_t vocab_size() const override { return cfg_.vocab_size; }
  std::vector<int32_t> eos_token_ids() const override { return {2}; }
  void shutdown() override;
  int64_t cancels() const { return cancels_.load(); }

 private:
  struct Seq {
    uint64_t id = 0;
    runtime::GenerateRequest req;
    runtime::OutputCallback cb;
    std::vector<int32_t> script;
    size_t pos = 0;
    int32_t blocks = 0;
  };
  void loop();
  void step();
  int32_t blocks_for(const Seq& s) const;

  FakeEngineConfig cfg_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Seq> waiting_;
  std::vector<Seq> running_;
  std::unordered_set<uint64_t> cancelled_;
  int64_t blocks_used_ = 0;
  int64_t generated_ = 0;
  int64_t prompt_total_ = 0;
  int64_t steps_ = 0;
  uint64_t next_id_ = 1;
  bool stop_ = false;
  std::atomic<int64_t> cancels_{0};
  std::thread thread_;
};

// The default script: if the prompt contains "SCRIPT:" the text after it (to the end of its
// line, special tokens parsed) is the output; otherwise words chosen from the prompt, the seed
// and the position (greedy = no randomness; a seed reproduces; no seed varies), including
// multi-byte characters, 60 words long.
std::vector<int32_t> default_script(const runtime::GenerateRequest& req);

}  // namespace frugal::server::testing
