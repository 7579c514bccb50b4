#include "fake_engine.h"

#include <random>

#include "byte_codec.h"

namespace frugal::server::testing {

FakeEngine::FakeEngine(FakeEngineConfig cfg) : cfg_(std::move(cfg)) {
  if (!cfg_.script) cfg_.script = default_script;
  thread_ = std::thread([this] { loop(); });
}

FakeEngine::~FakeEngine() { shutdown(); }

Result<uint64_t> FakeEngine::submit(runtime::GenerateRequest req, runtime::OutputCallback cb) {
  if (req.prompt.empty()) return invalid_argument("prompt is empty");
  if (static_cast<int32_t>(req.prompt.size()) >= cfg_.max_model_len) return invalid_argument("prompt longer than the context");
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return internal_error("engine is shut down");
  if (static_cast<int32_t>(waiting_.size()) >= cfg_.max_queue) {
    return resource_exhausted("the queue holds " + std::to_string(waiting_.size()) + " requests (max_queue)");
  }
  Seq s{.id = next_id_++, .req = std::move(req), .cb = std::move(cb)};
  s.script = cfg_.script(s.req);
  waiting_.push_back(std::move(s));
  cv_.notify_one();
  return waiting_.back().id;
}

Result<std::vector<uint64_t>> FakeEngine::submit_batch(std::vector<Submission> batch) {
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& p = batch[i].req.prompt;
    if (p.empty() || static_cast<int32_t>(p.size()) >= cfg_.max_model_len)
      return invalid_argument("request " + std::to_string(i) + ": prompt is empty or longer than the context");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return internal_error("engine is shut down");
  if (waiting_.size() + batch.size() > static_cast<size_t>(cfg_.max_queue))
    return resource_exhausted("the queue holds " + std::to_string(waiting_.size()) + " requests (max_queue)");
  std::vector<uint64_t> ids;
  for (auto& b : batch) {
    Seq s{.id = next_id_++, .req = std::move(b.req), .cb = std::move(b.cb)};
    s.script = cfg_.script(s.req);
    ids.push_back(s.id);
    waiting_.push_back(std::move(s));
  }
  cv_.notify_one();
  return ids;
}

void FakeEngine::cancel(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_.insert(id);
  cancels_++;
}

runtime::EngineStats FakeEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runtime::EngineStats{.running = static_cast<int64_t>(running_.size()),
                              .waiting = static_cast<int64_t>(waiting_.size()),
                              .kv_blocks_total = cfg_.n_blocks,
                              .kv_blocks_used = blocks_used_,
                              .prompt_tokens_total = prompt_total_,
                              .generation_tokens_total = generated_,
                              .steps = steps_};
}

void FakeEngine::shutdown() {
  std::vector<Seq> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& s : running_) left.push_back(std::move(s));
  for (auto& s : waiting_) left.push_back(std::move(s));
  running_.clear();
  waiting_.clear();
  blocks_used_ = 0;
  for (auto& s : left) {
    s.cb(runtime::RequestOutput{.request_id = s.id, .finish = runtime::FinishReason::kCancelled,
                                .prompt_tokens = static_cast<int32_t>(s.req.prompt.size())});
  }
}

int32_t FakeEngine::blocks_for(const Seq& s) const {
  int64_t tokens = static_cast<int64_t>(s.req.prompt.size() + s.pos) + 1;
  return static_cast<int32_t>((tokens + cfg_.block_size - 1) / cfg_.block_size);
}

void FakeEngine::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !waiting_.empty() || !running_.empty(); });
      if (stop_) return;
    }
    step();
    std::this_thread::sleep_for(cfg_.step_time);
  }
}

void FakeEngine::step() {
  std::vector<std::pair<runtime::OutputCallback, runtime::RequestOutput>> outs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++steps_;
    auto drop = [&](std::vector<Seq>::iterator it, runtime::FinishReason why) {
      blocks_used_ -= it->blocks;
      outs.push_back({it->cb, runtime::RequestOutput{.request_id = it->id, .finish = why,
                                                      .prompt_tokens = static_cast<int32_t>(it->req.prompt.size())}});
      return running_.erase(it);
    };
    for (auto it = running_.begin(); it != running_.end();) {
      it = cancelled_.erase(it->id) ? drop(it, runtime::FinishReason::kCancelled) : it + 1;
    }
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (cancelled_.erase(it->id)) {
        outs.push_back({it->cb, runtime::RequestOutput{.request_id = it->id, .finish = runtime::FinishReason::kCancelled,
                                                        .prompt_tokens = static_cast<int32_t>(it->req.prompt.size())}});
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    while (!waiting_.empty() && static_cast<int32_t>(running_.size()) < cfg_.max_running &&
           blocks_used_ + blocks_for(waiting_.front()) <= cfg_.n_blocks) {
      Seq s = std::move(waiting_.front());
      waiting_.pop_front();
      s.blocks = blocks_for(s);
      blocks_used_ += s.blocks;
      prompt_total_ += static_cast<int64_t>(s.req.prompt.size());
      running_.push_back(std::move(s));
    }
    for (auto it = running_.begin(); it != running_.end();) {
      Seq& s = *it;
      const auto& sp = s.req.sampling;
      if (s.pos >= s.script.size()) {
        it = drop(it, runtime::FinishReason::kStop);
        continue;
      }
      runtime::GeneratedToken g{.token = s.script[s.pos], .logprob = -0.25f - 0.01f * static_cast<float>(s.pos % 7)};
      for (int32_t k = 0; k < sp.top_logprobs; ++k) {
        g.top.push_back({.token = k == 0 ? g.token : kByte0 + ((g.token + 7 * k) % 256), .logprob = g.logprob - k});
      }
      s.pos++;
      generated_++;
      int32_t nb = blocks_for(s);
      blocks_used_ += nb - s.blocks;
      s.blocks = nb;
      runtime::RequestOutput out{.request_id = s.id, .tokens = {g}, .prompt_tokens = static_cast<int32_t>(s.req.prompt.size())};
      const bool at_max = static_cast<int32_t>(s.pos) >= sp.max_tokens;
      const bool at_ctx = static_cast<int32_t>(s.req.prompt.size() + s.pos) >= cfg_.max_model_len;
      if (at_max || at_ctx) {
        out.finish = runtime::FinishReason::kLength;
        blocks_used_ -= s.blocks;
        outs.push_back({s.cb, std::move(out)});
        it = running_.erase(it);
        continue;
      }
      outs.push_back({s.cb, std::move(out)});
      ++it;
    }
  }
  for (auto& [cb, out] : outs) cb(out);
}

std::vector<int32_t> default_script(const runtime::GenerateRequest& req) {
  std::string prompt;
  for (int32_t t : req.prompt) {
    if (t >= kByte0) prompt += static_cast<char>(t - kByte0);
    if (t == kThinkOpen) prompt += "<think>";
    if (t == kThinkClose) prompt += "</think>";
  }
  size_t at = prompt.rfind("SCRIPT:");
  if (at != std::string::npos) {
    std::string text = prompt.substr(at + 7);
    text = text.substr(0, text.find('\n'));
    return ByteCodec().encode(text, EncodeOptions{.parse_special = true}).value();
  }
  static const char* kWords[] = {"the", "cat", "sat", "on", "a", "mat", "and", "saw", "héllo", "日本",
                                 "dog", "ran", "🙂", "sun", "tree", "big", "little", "happy", "bird", "sky"};
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : req.prompt) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  const auto& sp = req.sampling;
  if (sp.temperature > 0) h ^= sp.seed ? *sp.seed * 0x9E3779B97F4A7C15ull : std::random_device{}();
  std::mt19937_64 rng(h);
  std::string text;
  for (int i = 0; i < 60; ++i) {
    if (i) text += ' ';
    text += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
  }
  text += '.';
  return ByteCodec().encode(text, EncodeOptions{}).value();
}

}  // namespace frugal::server::testing
