#include "server/generation.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>

#include "server/openai_responses.h"
#include "server/reasoning.h"
#include "server/stop_matcher.h"

namespace frugal::server {

namespace {
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Event {
  int32_t choice = 0;
  runtime::RequestOutput out;
  Clock::time_point at;
};

// Shared with the engine callbacks: they outlive the handler when the engine still reports a
// cancelled request after the client left.
class Mailbox : public std::enable_shared_from_this<Mailbox> {
 public:
  explicit Mailbox(asio::any_io_executor ex) : timer_(std::move(ex), Clock::time_point::max()) {}
  void push(Event e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(std::move(e));
    }
    if (!wake_posted_.exchange(true)) {
      // Expire the timer rather than cancel a wait: the handler may not be waiting yet (the
      // wait can start after a suspension), and a wait started on an expired timer completes
      // at once, so no wake-up is lost. take() re-arms it, on the same strand.
      asio::post(timer_.get_executor(), [self = shared_from_this()] { self->timer_.expires_at(Clock::time_point::min()); });
    }
  }
  std::vector<Event> take() {
    wake_posted_.store(false);
    timer_.expires_at(Clock::time_point::max());
    std::vector<Event> out;
    std::lock_guard<std::mutex> lock(mu_);
    out.swap(events_);
    return out;
  }
  bool empty() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_.empty();
  }
  asio::steady_timer& timer() { return timer_; }

 private:
  std::mutex mu_;
  std::vector<Event> events_;
  std::atomic<bool> wake_posted_{false};
  asio::steady_timer timer_;
};

struct Choice {
  uint64_t id = 0;
  bool submitted = false;
  bool done = false;
  bool sent_first = false;
  std::string finish_reason;
  std::optional<StopMatcher> matcher;
  std::optional<ReasoningParser> reasoning;
  std::string content, reasoning_text;  // non-streaming accumulators
  json logprobs;                        // chat: content array; completions: the four arrays
  std::optional<ApiError> error;
  Clock::time_point last_token;
  bool got_token = false;
};

const char* finish_name(runtime::FinishReason r) {
  switch (r) {
    case runtime::FinishReason::kStop: return "stop";
    case runtime::FinishReason::kLength: return "length";
    case runtime::FinishReason::kCancelled: return "abort";
    case runtime::FinishReason::kError: return "error";
    case runtime::FinishReason::kNone: break;
  }
  return "";
}

class Generation {
 public:
  Generation(GenerationPlan plan, GenerationServices svc, asio::any_io_executor ex)
      : plan_(std::move(plan)), svc_(svc), mailbox_(std::make_shared<Mailbox>(std::move(ex))),
        choices_(plan_.choices.size()), id_(make_response_id(plan_.endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-")),
        created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()),
        start_(Clock::now()) {
    for (size_t i = 0; i < choices_.size(); ++i) {
      auto& c = choices_[i];
      c.matcher.emplace(svc_.codec.stream_decoder(), plan_.stop);
      if (plan_.reasoning) c.reasoning.emplace(plan_.choices[i].opens_think);
      c.logprobs = plan_.endpoint == Endpoint::kChat ? json::array() : empty_completion_logprobs();
    }
  }
  ~Generation() { cancel_unfinished(); }

  std::optional<ApiError> submit() {
    for (size_t i = 0; i < choices_.size(); ++i) {
      auto mb = mailbox_;
      int32_t idx = static_cast<int32_t>(i);
      auto r = svc_.engine.submit(plan_.choices[i].request, [mb, idx](const runtime::RequestOutput& out) {
        mb->push(Event{idx, out, Clock::now()});
      });
      if (!r) {
        cancel_unfinished();
        for (auto& c : choices_) c.done = true;
        return from_status(r.status());
      }
      choices_[i].id = *r;
      choices_[i].submitted = true;
    }
    return std::nullopt;
  }

  void cancel_unfinished() {
    for (auto& c : choices_) {
      if (c.submitted && !c.done) svc_.engine.cancel(c.id);
      c.done = true;
    }
  }

  bool all_done() const {
    for (const auto& c : choices_) if (!c.done) return false;
    return true;
  }
  bool idle() { return mailbox_->empty(); }
  asio::steady_timer& timer() { return mailbox_->timer(); }
  bool failed() const {
    for (const auto& c : choices_) if (c.error) return true;
    return false;
  }
  ApiError first_error() const {
    for (const auto& c : choices_) if (c.error) return *c.error;
    return server_error("no error");
  }

  // Processes every queued output; returns the SSE events to send (streaming) or "".
  std::string drain() {
    std::string sse;
    for (auto& e : mailbox_->take()) handle(e, sse);
    return sse;
  }

  std::string stream_tail() {
    std::string sse;
    if (plan_.include_usage) {
      json chunk = chunk_header();
      chunk["choices"] = json::array();
      chunk["usage"] = usage();
      sse += "data: " + dump_json(chunk) + "\n\n";
    }
    sse += "data: [DONE]\n\n";
    return sse;
  }

  json response() const {
    json choices = json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      const auto& c = choices_[i];
      json ch = {{"index", i}, {"finish_reason", c.finish_reason}, {"logprobs", nullptr}};
      if (plan_.endpoint == Endpoint::kChat) {
        json msg = {{"role", "assistant"}, {"content", c.content}};
        if (plan_.reasoning) {
          msg["reasoning_content"] = c.reasoning_text.empty() ? json(nullptr) : json(c.reasoning_text);
          if (c.content.empty() && !c.reasoning_text.empty()) msg["content"] = nullptr;
        }
        ch["message"] = std::move(msg);
        if (plan_.logprobs) ch["logprobs"] = {{"content", c.logprobs}, {"refusal", nullptr}};
      } else {
        ch["text"] = plan_.echo_prefix[plan_.choices[i].prompt_index] + c.content;
        if (plan_.logprobs) ch["logprobs"] = c.logprobs;
      }
      choices.push_back(std::move(ch));
    }
    json r = {{"id", id_}, {"object", plan_.endpoint == Endpoint::kChat ? "chat.completion" : "text_completion"},
              {"created", created_}, {"model", plan_.model}, {"system_fingerprint", plan_.system_fingerprint},
              {"choices", std::move(choices)}, {"usage", usage()}};
    return r;
  }

  void record_metrics() const {
    int64_t completion = 0;
    for (const auto& c : choices_) completion += c.matcher->n_tokens();
    svc_.metrics.observe_tokens(total_prompt_tokens(), completion);
    svc_.metrics.observe_e2e(std::chrono::duration<double>(Clock::now() - start_).count());
  }

 private:
  int64_t total_prompt_tokens() const {
    int64_t n = 0;
    for (int32_t p : plan_.prompt_tokens) n += p;
    return n;
  }
  json usage() const {
    int64_t completion = 0;
    for (const auto& c : choices_) completion += c.matcher->n_tokens();
    return usage_json(total_prompt_tokens(), completion);
  }
  json chunk_header() const {
    json chunk = {{"id", id_}, {"object", plan_.endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion"},
                  {"created", created_}, {"model", plan_.model}, {"system_fingerprint", plan_.system_fingerprint}};
    if (plan_.include_usage) chunk["usage"] = nullptr;
    return chunk;
  }

  void observe_timing(Choice& c, const Event& e) {
    size_t k = e.out.tokens.size();
    if (k == 0) return;
    if (!c.got_token) {
      svc_.metrics.observe_ttft(std::chrono::duration<double>(e.at - start_).count());
      if (k > 1) for (size_t i = 1; i < k; ++i) svc_.metrics.observe_itl(0.0);
    } else {
      double gap = std::chrono::duration<double>(e.at - c.last_token).count() / static_cast<double>(k);
      for (size_t i = 0; i < k; ++i) svc_.metrics.observe_itl(gap);
    }
    c.got_token = true;
    c.last_token = e.at;
  }

  void handle(const Event& e, std::string& sse) {
    Choice& c = choices_[e.choice];
    if (c.done) return;
    observe_timing(c, e);
    TextDelta d = c.matcher->push(e.out.tokens);
    if (d.stopped) {
      c.finish_reason = "stop";
      c.done = true;
      svc_.engine.cancel(c.id);  // the engine does not know about stop strings
    } else if (e.out.finish != runtime::FinishReason::kNone) {
      TextDelta tail = c.matcher->finish();
      d.text += tail.text;
      d.tokens.insert(d.tokens.end(), tail.tokens.begin(), tail.tokens.end());
      // The stream's last bytes may complete a stop string only once flushed (stop_matcher.h).
      c.finish_reason = tail.stopped && e.out.finish != runtime::FinishReason::kError ? "stop" : finish_name(e.out.finish);
      c.done = true;
      if (e.out.finish == runtime::FinishReason::kError) {
        c.error = server_error("generation failed: " + e.out.error.to_string());
      }
    }
    emit(e.choice, c, d, sse);
  }

  void emit(int32_t index, Choice& c, const TextDelta& d, std::string& sse) {
    ReasoningDelta rd;
    if (c.reasoning) {
      rd = c.reasoning->push(d.text);
      if (c.done) {
        ReasoningDelta tail = c.reasoning->finish();
        rd.reasoning += tail.reasoning;
        rd.content += tail.content;
      }
    } else {
      rd.content = d.text;
    }
    if (plan_.logprobs) {
      if (plan_.endpoint == Endpoint::kChat) {
        for (auto& x : chat_logprobs_content(svc_.codec, d.tokens)) c.logprobs.push_back(std::move(x));
      } else {
        append_completion_logprobs(svc_.codec, d.tokens, echo_len(index), c.logprobs);
      }
    }
    if (!plan_.stream) {
      c.content += rd.content;
      c.reasoning_text += rd.reasoning;
      return;
    }
    if (plan_.endpoint == Endpoint::kChat) {
      emit_chat_chunk(index, c, rd, d, sse);
    } else {
      emit_completion_chunk(index, c, rd.content, d, sse);
    }
  }

  size_t echo_len(int32_t index) const { return plan_.echo_prefix[plan_.choices[index].prompt_index].size(); }

  void emit_chat_chunk(int32_t index, Choice& c, const ReasoningDelta& rd, const TextDelta& d, std::string& sse) {
    if (c.error) {
      sse += "data: " + c.error->body() + "\n\n";
      return;
    }
    if (!c.sent_first) {
      json first = chunk_header();
      first["choices"] = json::array({{{"index", index}, {"delta", {{"role", "assistant"}, {"content", ""}}},
                                       {"logprobs", nullptr}, {"finish_reason", nullptr}}});
      sse += "data: " + dump_json(first) + "\n\n";
      c.sent_first = true;
    }
    bool has_logprobs = plan_.logprobs && !d.tokens.empty();
    if (rd.empty() && !has_logprobs && !c.done) return;
    json delta = json::object();
    if (!rd.reasoning.empty()) delta["reasoning_content"] = rd.reasoning;
    if (!rd.content.empty()) delta["content"] = rd.content;
    json ch = {{"index", index}, {"delta", std::move(delta)}, {"logprobs", nullptr},
               {"finish_reason", c.done ? json(c.finish_reason) : json(nullptr)}};
    if (has_logprobs) ch["logprobs"] = {{"content", chat_logprobs_content(svc_.codec, d.tokens)}, {"refusal", nullptr}};
    json chunk = chunk_header();
    chunk["choices"] = json::array({std::move(ch)});
    sse += "data: " + dump_json(chunk) + "\n\n";
  }

  void emit_completion_chunk(int32_t index, Choice& c, const std::string& text, const TextDelta& d, std::string& sse) {
    if (c.error) {
      sse += "data: " + c.error->body() + "\n\n";
      return;
    }
    std::string out;
    if (!c.sent_first) {
      out = plan_.echo_prefix[plan_.choices[index].prompt_index];
      c.sent_first = true;
    }
    out += text;
    bool has_logprobs = plan_.logprobs && !d.tokens.empty();
    if (out.empty() && !has_logprobs && !c.done) return;
    json ch = {{"index", index}, {"text", out}, {"logprobs", nullptr},
               {"finish_reason", c.done ? json(c.finish_reason) : json(nullptr)}};
    if (has_logprobs) {
      json lp = empty_completion_logprobs();
      append_completion_logprobs(svc_.codec, d.tokens, echo_len(index), lp);
      ch["logprobs"] = std::move(lp);
    }
    json chunk = chunk_header();
    chunk["choices"] = json::array({std::move(ch)});
    sse += "data: " + dump_json(chunk) + "\n\n";
  }

  GenerationPlan plan_;
  GenerationServices svc_;
  std::shared_ptr<Mailbox> mailbox_;
  std::vector<Choice> choices_;
  std::string id_;
  int64_t created_;
  Clock::time_point start_;
};

HttpResponse json_response(int status, const std::string& body, bool keep_alive) {
  return make_response(static_cast<http::status>(status), body, keep_alive);
}
}  // namespace

asio::awaitable<int> run_generation(GenerationPlan& plan, const GenerationServices& svc, HttpConnection& conn) {
  const bool stream = plan.stream;
  asio::any_io_executor ex = co_await asio::this_coro::executor;
  Generation gen(std::move(plan), svc, ex);
  std::optional<ApiError> err = gen.submit();
  if (err) {
    {
      HttpResponse res_ = json_response(err->status, err->body(), conn.keep_alive());
      co_await conn.write(res_);
    }
    co_return err->status;
  }
  // (co_await kept out of && / || conditions: GCC 12 coroutine lowering is fragile there.)
  if (stream) {
    bool started = co_await conn.start_events();
    if (!started) {
      gen.cancel_unfinished();
      co_return 499;
    }
  }
  for (;;) {
    std::string sse = gen.drain();
    if (!sse.empty()) {
      bool written = co_await conn.write_events(sse);
      if (!written) break;
    }
    if (gen.all_done()) break;
    if (gen.idle()) {
      bool alive = co_await conn.wait(gen.timer());
      if (!alive) break;
    }
  }
  if (!conn.ok()) {  // the client went away: free its KV now
    gen.cancel_unfinished();
    co_return 499;
  }
  gen.record_metrics();
  if (stream) {
    std::string tail = gen.stream_tail();
    co_await conn.write_events(tail);
    co_await conn.end_events();
    co_return 200;
  }
  if (gen.failed()) {
    ApiError failure = gen.first_error();
    {
      HttpResponse res_ = json_response(failure.status, failure.body(), conn.keep_alive());
      co_await conn.write(res_);
    }
    co_return failure.status;
  }
  {
    HttpResponse res_ = json_response(200, dump_json(gen.response()), conn.keep_alive());
    co_await conn.write(res_);
  }
  co_return 200;
}

}  // namespace frugal::server
