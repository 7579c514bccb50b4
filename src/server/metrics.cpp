#include "server/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace frugal::server {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

namespace {
Histogram::BucketBoundaries latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
          1.0,   2.5,    5.0,   7.5,  10,   20,   40,   80,   160};
}
}  // namespace

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> reg = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>& requests =
      BuildCounter().Name("frugal_requests_total").Help("HTTP requests by endpoint and status").Register(*reg);
  prometheus::Counter& prompt_tokens =
      BuildCounter().Name("frugal_prompt_tokens_total").Help("Prompt tokens of served requests").Register(*reg).Add({});
  prometheus::Counter& generation_tokens =
      BuildCounter().Name("frugal_generation_tokens_total").Help("Generated tokens of served requests").Register(*reg).Add({});
  Histogram& ttft = BuildHistogram().Name("frugal_time_to_first_token_seconds")
                        .Help("Time from request arrival to its first generated token").Register(*reg)
                        .Add({}, latency_buckets());
  Histogram& itl = BuildHistogram().Name("frugal_inter_token_latency_seconds")
                       .Help("Time between consecutive generated tokens of a request").Register(*reg)
                       .Add({}, latency_buckets());
  Histogram& e2e = BuildHistogram().Name("frugal_e2e_request_latency_seconds")
                       .Help("Time from request arrival to its last token").Register(*reg)
                       .Add({}, latency_buckets());
  prometheus::Gauge& running = gauge("frugal_num_requests_running", "Sequences being prefilled or decoded");
  prometheus::Gauge& waiting = gauge("frugal_num_requests_waiting", "Sequences waiting to be scheduled");
  prometheus::Gauge& kv_used = gauge("frugal_kv_cache_blocks_used", "KV cache blocks in use");
  prometheus::Gauge& kv_total = gauge("frugal_kv_cache_blocks_total", "KV cache blocks in the pool");
  prometheus::Gauge& kv_usage = gauge("frugal_kv_cache_usage_ratio", "KV cache blocks in use / total (0..1)");
  prometheus::Gauge& prefix_rate = gauge("frugal_prefix_cache_hit_rate", "Prefix cache hits / queries since start (0..1)");
  prometheus::Gauge& prefix_queries = gauge("frugal_prefix_cache_queries", "Prompt blocks looked up in the prefix cache since start");
  prometheus::Gauge& prefix_hits = gauge("frugal_prefix_cache_hits", "Prompt blocks found in the prefix cache since start");
  prometheus::Gauge& preemptions = gauge("frugal_num_preemptions", "Sequences preempted (recomputed) since start");
  std::mutex render_mu;

  prometheus::Gauge& gauge(const char* name, const char* help) {
    return BuildGauge().Name(name).Help(help).Register(*reg).Add({});
  }
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {}
Metrics::~Metrics() = default;

void Metrics::count_request(const std::string& endpoint, int status) {
  impl_->requests.Add({{"endpoint", endpoint}, {"status", std::to_string(status)}}).Increment();
}

void Metrics::observe_tokens(int64_t prompt_tokens, int64_t generation_tokens) {
  impl_->prompt_tokens.Increment(static_cast<double>(prompt_tokens));
  impl_->generation_tokens.Increment(static_cast<double>(generation_tokens));
}

void Metrics::observe_ttft(double s) { impl_->ttft.Observe(s); }
void Metrics::observe_itl(double s) { impl_->itl.Observe(s); }
void Metrics::observe_e2e(double s) { impl_->e2e.Observe(s); }

std::string Metrics::render(const runtime::EngineStats& st) {
  std::lock_guard<std::mutex> lock(impl_->render_mu);
  auto& m = *impl_;
  m.running.Set(static_cast<double>(st.running));
  m.waiting.Set(static_cast<double>(st.waiting));
  m.kv_used.Set(static_cast<double>(st.kv_blocks_used));
  m.kv_total.Set(static_cast<double>(st.kv_blocks_total));
  m.kv_usage.Set(st.kv_blocks_total > 0 ? static_cast<double>(st.kv_blocks_used) / st.kv_blocks_total : 0.0);
  m.prefix_rate.Set(st.prefix_cache_queries > 0
                        ? static_cast<double>(st.prefix_cache_hits) / st.prefix_cache_queries : 0.0);
  m.prefix_queries.Set(static_cast<double>(st.prefix_cache_queries));
  m.prefix_hits.Set(static_cast<double>(st.prefix_cache_hits));
  m.preemptions.Set(static_cast<double>(st.preemptions));
  return prometheus::TextSerializer().Serialize(m.reg->Collect());
}

}  // namespace frugal::server
