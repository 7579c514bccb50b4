// The engine thread: drain submissions and cancels, schedule a step, run the model, sample,
// hand results back through the requests' callbacks. See docs/engine_contract.md.
#include "runtime/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "core/log.h"
#include "core/thread_pool.h"
#include "kv/block_pool.h"
#include "kv/kv_geometry.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "model/step_batch.h"
#include "runtime/backends.h"
#include "runtime/kv_sizing.h"
#include "runtime/sampler.h"
#include "sched/scheduler.h"

namespace frugal::runtime {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "?";
}

namespace {

struct Pending {
  uint64_t id;
  GenerateRequest req;
  OutputCallback cb;
};

// Rank 0's admitted requests and cancels of one step, as bytes for the other ranks of a
// tensor-parallel server (EngineOptions::tp_replicate_requests). Host byte order: the ranks of
// one group run the same binary on the same kind of machine.
class StepWire {
 public:
  std::vector<uint8_t> bytes;
  template <typename T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
  void put_ids(const std::vector<int32_t>& v) {
    put(static_cast<uint64_t>(v.size()));
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    bytes.insert(bytes.end(), p, p + v.size() * sizeof(int32_t));
  }
  void put_request(const Pending& p) {
    const SamplingParams& s = p.req.sampling;
    put(p.id);
    put_ids(p.req.prompt);
    put(s.temperature), put(s.top_p), put(s.top_k), put(s.min_p), put(s.repetition_penalty);
    put(s.presence_penalty), put(s.frequency_penalty), put(s.seed.value_or(0)), put(s.max_tokens);
    put(static_cast<uint8_t>(s.ignore_eos)), put(s.top_logprobs);
    put_ids(s.stop_token_ids);
    put_ids(s.score_tokens);
  }
};

class StepWireReader {
 public:
  explicit StepWireReader(const std::vector<uint8_t>& b) : b_(b) {}
  template <typename T>
  bool get(T* v) {
    if (pos_ + sizeof(T) > b_.size()) return false;
    std::memcpy(v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool get_ids(std::vector<int32_t>* v) {
    uint64_t n = 0;
    if (!get(&n) || n > (b_.size() - pos_) / sizeof(int32_t)) return false;
    v->resize(n);
    std::memcpy(v->data(), b_.data() + pos_, n * sizeof(int32_t));
    pos_ += n * sizeof(int32_t);
    return true;
  }
  bool get_request(Pending* p) {
    SamplingParams& s = p->req.sampling;
    uint64_t seed = 0;
    uint8_t ignore_eos = 0;
    const bool ok = get(&p->id) && get_ids(&p->req.prompt) && get(&s.temperature) && get(&s.top_p) && get(&s.top_k) &&
                    get(&s.min_p) && get(&s.repetition_penalty) && get(&s.presence_penalty) && get(&s.frequency_penalty) &&
                    get(&seed) && get(&s.max_tokens) && get(&ignore_eos) && get(&s.top_logprobs) &&
                    get_ids(&s.stop_token_ids) && get_ids(&s.score_tokens);
    s.seed = seed;
    s.ignore_eos = ignore_eos != 0;
    return ok;
  }
  bool done() const { return pos_ == b_.size(); }

 private:
  const std::vector<uint8_t>& b_;
  size_t pos_ = 0;
};

// What the engine thread keeps per live request.
struct Live {
  SamplingParams sampling;
  uint64_t seed = 0;  // device sampling: the step's seed is mix(seed, tokens generated)
  bool host_sampling = false;  // penalties, min_p or logprobs: sampled on the host
  OutputCallback cb;
  std::unique_ptr<Sampler> sampler;
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
  bool first_output_sent = false;
};

// One row of a step's logits: the sequence it belongs to and, after the model ran, its token
// (device sampling) or its logits on the host (host sampling).
struct StepRow {
  uint64_t id;
  size_t logits_row;
  Live* live;
  GeneratedToken gt;
  float* logits = nullptr;
  std::vector<TokenLogprob> scored;  // SamplingParams::score_tokens, first token only
};

// Whether a request needs the host sampler (the device sample op has no penalties, min_p or
// logprobs).
bool needs_host_sampling(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f || p.min_p > 0.0f ||
         p.top_logprobs >= 0 || !p.score_tokens.empty();
}

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Log-probabilities of the raw logits (before penalties and temperature, as OpenAI reports).
void log_softmax(std::span<const float> logits, std::vector<float>& out) {
  out.resize(logits.size());
  float mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - mx));
  float lse = mx + static_cast<float>(std::log(sum));
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - lse;
}

class EngineImpl final : public Engine {
 public:
  ~EngineImpl() override { shutdown(); }

  Status init(const EngineOptions& o);

  Result<uint64_t> submit(GenerateRequest req, OutputCallback cb) override;
  Result<std::vector<uint64_t>> submit_batch(std::vector<Submission> batch) override;
  void cancel(uint64_t request_id) override;
  EngineStats stats() const override;
  MemoryReport memory() const override {
    MemoryReport m = memory_;
    m.graphs_bytes = backend_.backend->graph_bytes();  // grows as decode shapes are first seen
    return m;
  }
  int32_t max_model_len() const override { return max_model_len_; }
  int32_t vocab_size() const override { return static_cast<int32_t>(model_->config().vocab_size); }
  std::vector<int32_t> eos_token_ids() const override { return eos_ids_; }
  void shutdown() override;

 private:
  // What submit() refuses synchronously: empty or too long prompts, ids outside the vocabulary,
  // bad sampling parameters, a non-zero rank of a replicated tensor-parallel group.
  Status check_request(const GenerateRequest& req) const;
  // Queues checked requests under one lock (one engine step takes them all) or refuses them all.
  Result<std::vector<uint64_t>> enqueue(std::vector<Submission>& batch);
  void thread_main();
  // take < 0: every submitted request; else exactly the first `take` (waiting for them): a
  // tensor-parallel rank admits what rank 0 admitted.
  void drain_inbox(int64_t take = -1);
  // Admits requests and applies cancels (the engine thread's half of drain_inbox).
  void admit(std::deque<Pending>& inbox, std::vector<uint64_t>& cancels);
  // EngineOptions::tp_replicate_requests: rank 0 takes its inbox and sends it (and whether to
  // stop) to the other ranks, which admit the same requests unseen. False: stop.
  bool replicate_step(bool leader);
  Status step();
  Status run_model(std::vector<StepRow>& rows);
  Status emit(std::vector<StepRow>& rows);
  void fail_batch(const sched::ScheduledBatch& batch, const Status& st);
  EngineStats publish_stats();  // returns the snapshot it published

  EngineOptions opts_;
  BackendHandle backend_;
  std::unique_ptr<dist::Communicator> comm_;  // tensor parallel; outlives the model, not the backend
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<model::KvStorage> kv_;
  std::unique_ptr<kv::BlockPool> pool_;
  std::unique_ptr<sched::Scheduler> sched_;
  std::vector<int32_t> eos_ids_;
  int32_t max_model_len_ = 0;
  MemoryReport memory_;

  // Inbox (any thread -> engine thread).
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> inbox_;
  std::vector<uint64_t> cancels_;
  bool stop_ = false;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<int64_t> queued_{0};  // submitted, not yet finished

  // Engine-thread state.
  std::unordered_map<uint64_t, Live> live_;
  std::random_device random_seed_;
  std::vector<float> logits_;
  bool device_sampling_ = false;
  model::StepBatch step_;  // this step's inputs, built once from the scheduled batch
  std::vector<int32_t> ids_, host_rows_;
  double schedule_s_ = 0, forward_s_ = 0, output_s_ = 0;
  int64_t decode_steps_ = 0, decode_step_tokens_ = 0;  // EngineStats::decode_steps and its tokens
  double decode_forward_s_ = 0;
  std::thread thread_;

  mutable std::mutex stats_mu_;
  EngineStats stats_;
};

Status EngineImpl::init(const EngineOptions& o) {
  opts_ = o;
  const int tp = o.tensor_parallel_size;
  if (tp < 1) return invalid_argument("--tensor-parallel-size must be >= 1, got " + std::to_string(tp));
  const bool cpu_ranks = o.device == "cpu" || o.device == "ref";
  // A GPU rank drives the GPU of its local rank.
  FRUGAL_ASSIGN_OR_RETURN(backend_, make_backend(tp > 1 && !cpu_ranks ? "cuda:" + std::to_string(o.rank_env.local_rank)
                                                                      : o.device, o.threads));
  if (tp > 1) {
    if (cpu_ranks) {
      FRUGAL_ASSIGN_OR_RETURN(comm_, dist::make_mpi_communicator());
    } else {
      FRUGAL_ASSIGN_OR_RETURN(void* stream, backend_stream(*backend_.backend));
      FRUGAL_ASSIGN_OR_RETURN(comm_, dist::make_nccl_communicator(o.rank_env, stream));
    }
    if (comm_->world_size() != tp)
      return invalid_argument("--tensor-parallel-size " + std::to_string(tp) + " but this group has " +
                              std::to_string(comm_->world_size()) + " ranks (" + comm_->name() + ")");
  }
  FRUGAL_ASSIGN_OR_RETURN(const model::DummyPrecision precision, model::parse_dummy_precision(o.weight_precision));
  if (precision != model::DummyPrecision::kDense && !o.dummy_weights)
    return invalid_argument("--precision " + o.weight_precision +
                            " applies to --dummy-weights; a checkpoint loads in the format it is stored in");
  FRUGAL_ASSIGN_OR_RETURN(const model::DummyPrecision lm_head, model::parse_lm_head_precision(o.lm_head_precision));
  model::LoadOptions lo{.dummy_weights = o.dummy_weights,
                        .dummy_precision = precision,
                        .dummy_lm_head = lm_head,
                        .max_batch_tokens = o.max_num_batched_tokens,
                        .max_seqs = o.max_num_seqs,
                        .max_logit_rows = o.max_num_seqs,
                        .max_context = o.max_model_len,
                        .block_size = o.block_size,
                        .kv_window = o.kv_window,
                        .kv_sinks = o.kv_sinks,
                        .comm = comm_.get()};
  FRUGAL_ASSIGN_OR_RETURN(model_, model::Model::load(o.model_dir, backend_.backend.get(), lo));
  if (o.sampling != "auto" && o.sampling != "device" && o.sampling != "host")
    return invalid_argument("sampling: '" + o.sampling + "' is not one of auto, device, host");
  device_sampling_ = model_->supports_sampling() &&
                     (o.sampling == "device" || (o.sampling == "auto" && !backend_.backend->weights_in_host_memory()));
  model_->set_graphs_enabled(o.graphs);
  const auto& cfg = model_->config();
  max_model_len_ = model_->max_context();
  for (int64_t e : cfg.eos_token_ids) eos_ids_.push_back(static_cast<int32_t>(e));
  for (int64_t e : model_->generation_config().eos_token_ids) {
    if (std::find(eos_ids_.begin(), eos_ids_.end(), e) == eos_ids_.end()) eos_ids_.push_back(static_cast<int32_t>(e));
  }

  // KV pool: an explicit block count, else a fraction of free device memory, else a host budget.
  FRUGAL_ASSIGN_OR_RETURN(const DType kv_dtype, engine_kv_dtype(*backend_.backend, o.kv_cache_dtype));
  const kv::KvGeometry g = engine_kv_geometry(model_->local_config(), kv_dtype, o.block_size);  // this rank's heads
  int64_t n_blocks = o.num_kv_blocks;
  if (n_blocks <= 0) {
    size_t free_b = 0, total_b = 0;
    int64_t budget = o.cpu_kv_budget_bytes;
    if (backend_.backend->device_memory(&free_b, &total_b).is_ok()) {
      // Leave (1 - utilization) of the card, plus what the step's workspace will still take.
      int64_t reserve = static_cast<int64_t>((1.0 - o.gpu_memory_utilization) * static_cast<double>(total_b));
      budget = static_cast<int64_t>(free_b) - reserve - (256ll << 20);
    }
    n_blocks = std::max<int64_t>(1, kv::n_blocks_for_budget(g, budget));
    // No point holding more than every sequence at full length needs.
    int64_t cap = static_cast<int64_t>(o.max_num_seqs) * ((max_model_len_ + o.block_size - 1) / o.block_size) + 1;
    n_blocks = std::min(n_blocks, cap);
  }
  if (comm_) {  // every rank's pool as large as the smallest one's (the same schedule everywhere)
    int64_t least = n_blocks;
    for (int r = 0; r < comm_->world_size(); ++r) {
      int64_t v = n_blocks;
      FRUGAL_RETURN_IF_ERROR(comm_->broadcast_host(&v, sizeof v, r));
      least = std::min(least, v);
    }
    n_blocks = least;
  }
  FRUGAL_ASSIGN_OR_RETURN(kv_, model::KvStorage::create(backend_.backend.get(), g, static_cast<int32_t>(n_blocks)));
  FRUGAL_ASSIGN_OR_RETURN(kv::BlockPool pool, kv::BlockPool::create({.n_blocks = static_cast<int32_t>(n_blocks),
                                                                      .block_size = o.block_size,
                                                                      .enable_prefix_caching = o.enable_prefix_caching}));
  pool_ = std::make_unique<kv::BlockPool>(std::move(pool));
  FRUGAL_ASSIGN_OR_RETURN(sched::Scheduler s, sched::Scheduler::create({.max_num_batched_tokens = o.max_num_batched_tokens,
                                                                         .max_num_seqs = o.max_num_seqs,
                                                                         .enable_chunked_prefill = o.enable_chunked_prefill,
                                                                         .max_model_len = max_model_len_,
                                                                         .max_prefill_chunk_tokens = o.max_prefill_chunk_tokens,
                                                                         .long_prefill_token_threshold = o.long_prefill_token_threshold,
                                                                         .long_prefill_chunk_tokens = o.long_prefill_chunk_tokens,
                                                                         .kv_window = model_->all_layers_window(),
                                                                         .kv_sinks = model_->all_layers_sinks()},
                                                                        pool_.get()));
  sched_ = std::make_unique<sched::Scheduler>(std::move(s));
  memory_.weights_bytes = model_->weight_bytes();
  memory_.weights_by_role = model_->weight_bytes_by_role();
  for (const auto& r : memory_.weights_by_role)
    FRUGAL_LOG_INFO("engine: weights {}: {} tensors, {}, {:.1f} MiB", r.role, r.n_tensors, r.format, r.bytes / 1048576.0);
  memory_.workspace_bytes = model_->workspace_bytes();
  memory_.kv_pool_bytes = kv_->bytes();
  memory_.kv_dtype = kv::kv_dtype_label(kv_dtype);
  memory_.kv_bytes_per_token = kv::bytes_per_token(g);
  memory_.kv_capacity_tokens = n_blocks * o.block_size;
  stats_.kv_blocks_total = n_blocks;
  FRUGAL_LOG_INFO("engine: {} on {}, {} KV blocks of {} tokens ({} KV, {} B/token, {:.1f} MiB), max_model_len {}",
                  o.model_dir, backend_.backend->name(), n_blocks, o.block_size, memory_.kv_dtype,
                  memory_.kv_bytes_per_token, kv_->bytes() / 1048576.0, max_model_len_);
  thread_ = std::thread([this] { thread_main(); });
  return Status::ok();
}

Status EngineImpl::check_request(const GenerateRequest& req) const {
  if (comm_ && opts_.tp_replicate_requests && comm_->rank() != 0)
    return unsupported("tensor-parallel rank " + std::to_string(comm_->rank()) + " takes its requests from rank 0 only");
  if (req.prompt.empty()) return invalid_argument("prompt: must contain at least one token");
  const int32_t vocab = vocab_size();
  for (size_t i = 0; i < req.prompt.size(); ++i) {
    if (req.prompt[i] < 0 || req.prompt[i] >= vocab)
      return invalid_argument("prompt: token " + std::to_string(i) + " has id " + std::to_string(req.prompt[i]) +
                              ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
  if (static_cast<int64_t>(req.prompt.size()) >= max_model_len_)
    return invalid_argument("prompt: " + std::to_string(req.prompt.size()) + " tokens leave no room to generate: the context is " +
                            std::to_string(max_model_len_) + " tokens");
  for (size_t i = 0; i < req.sampling.score_tokens.size(); ++i) {
    const int32_t t = req.sampling.score_tokens[i];
    if (t < 0 || t >= vocab)
      return invalid_argument("score_tokens: entry " + std::to_string(i) + " has id " + std::to_string(t) +
                              ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
  return validate(req.sampling);
}

Result<uint64_t> EngineImpl::submit(GenerateRequest req, OutputCallback cb) {
  FRUGAL_RETURN_IF_ERROR(check_request(req));
  std::vector<Submission> one;
  one.push_back({std::move(req), std::move(cb)});
  FRUGAL_ASSIGN_OR_RETURN(auto ids, enqueue(one));
  return ids[0];
}

Result<std::vector<uint64_t>> EngineImpl::submit_batch(std::vector<Submission> batch) {
  if (batch.empty()) return std::vector<uint64_t>{};
  for (size_t i = 0; i < batch.size(); ++i) {
    if (Status st = check_request(batch[i].req); !st.is_ok())
      return st.with_context("request " + std::to_string(i) + " of " + std::to_string(batch.size()));
  }
  return enqueue(batch);
}

Result<std::vector<uint64_t>> EngineImpl::enqueue(std::vector<Submission>& batch) {
  const int64_t n = static_cast<int64_t>(batch.size());
  if (queued_.load() + n > opts_.max_queue)
    return resource_exhausted("engine queue is full (" + std::to_string(opts_.max_queue) + " requests" +
                              (n > 1 ? ", " + std::to_string(n) + " more asked" : std::string()) + ")");
  std::vector<uint64_t> ids;
  ids.reserve(batch.size());
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return Status(ErrorCode::kCancelled, "engine is shutting down");
    for (auto& b : batch) {
      ids.push_back(next_id_.fetch_add(1));
      inbox_.push_back({ids.back(), std::move(b.req), std::move(b.cb)});
    }
    queued_ += n;
  }
  cv_.notify_one();
  return ids;
}

void EngineImpl::cancel(uint64_t request_id) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    cancels_.push_back(request_id);
  }
  cv_.notify_one();
}

EngineStats EngineImpl::stats() const {
  std::lock_guard<std::mutex> lk(stats_mu_);
  return stats_;
}

void EngineImpl::shutdown() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EngineImpl::drain_inbox(int64_t take) {
  std::deque<Pending> inbox;
  std::vector<uint64_t> cancels;
  {
    std::unique_lock<std::mutex> lk(mu_);
    if (take < 0) {
      inbox.swap(inbox_);
    } else {
      cv_.wait(lk, [&] { return static_cast<int64_t>(inbox_.size()) >= take; });
      for (int64_t i = 0; i < take; ++i) {
        inbox.push_back(std::move(inbox_.front()));
        inbox_.pop_front();
      }
    }
    cancels.swap(cancels_);
  }
  admit(inbox, cancels);
}

void EngineImpl::admit(std::deque<Pending>& inbox, std::vector<uint64_t>& cancels) {
  for (auto& p : inbox) {
    const int32_t room = max_model_len_ - static_cast<int32_t>(p.req.prompt.size());
    sched::SeqParams sp{.max_tokens = std::max(1, std::min(p.req.sampling.max_tokens, room)),
                        .eos_token_ids = eos_ids_,
                        .ignore_eos = p.req.sampling.ignore_eos,
                        .stop_token_ids = p.req.sampling.stop_token_ids};
    Status st = sched_->add_request(p.id, p.req.prompt, sp);
    RequestOutput out;
    out.request_id = p.id;
    out.prompt_tokens = static_cast<int32_t>(p.req.prompt.size());
    if (!st.is_ok()) {
      out.finish = FinishReason::kError;
      out.error = st;
      --queued_;
      p.cb(out);
      continue;
    }
    Live l;
    l.sampling = p.req.sampling;
    l.seed = p.req.sampling.seed ? mix64(*p.req.sampling.seed ^ 0x5851f42d4c957f2dull) : mix64(random_seed_() ^ p.id);
    l.host_sampling = needs_host_sampling(p.req.sampling);
    l.cb = std::move(p.cb);
    l.sampler = std::make_unique<Sampler>(p.req.sampling);
    l.prompt = std::move(p.req.prompt);
    live_.emplace(p.id, std::move(l));
  }
  for (uint64_t id : cancels) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    (void)sched_->cancel(id);  // frees blocks now (no step is in flight between steps)
    publish_stats();
    RequestOutput out;
    out.request_id = id;
    out.finish = FinishReason::kCancelled;
    out.prompt_tokens = static_cast<int32_t>(it->second.prompt.size());
    it->second.cb(out);
    live_.erase(it);
    --queued_;
  }
}

void EngineImpl::fail_batch(const sched::ScheduledBatch& batch, const Status& st) {
  FRUGAL_LOG_ERROR("engine: step failed: {}", st.to_string());
  for (const auto& s : batch.seqs) {
    auto it = live_.find(s.id);
    if (it == live_.end()) continue;
    RequestOutput out;
    out.request_id = s.id;
    out.finish = FinishReason::kError;
    out.error = st;
    out.prompt_tokens = static_cast<int32_t>(it->second.prompt.size());
    it->second.cb(out);
    live_.erase(it);
    --queued_;
  }
}

// Fills the step's one input representation from the scheduled batch (the vectors are reused
// from step to step; the runner pads them in place for a graph replay).
void fill_step_batch(const sched::ScheduledBatch& batch, model::StepBatch& out) {
  int32_t max_blocks = 0;
  for (const auto& s : batch.seqs) max_blocks = std::max<int32_t>(max_blocks, static_cast<int32_t>(s.block_table.size()));
  out.reset(max_blocks);
  for (const auto& s : batch.seqs)
    out.add_seq(s.token_ids, s.start_pos, s.context_len, s.block_table, s.slot_mapping, s.needs_logits);
}

// Samples the rows whose logits came to the host, in parallel (each request's sampler is
// independent; at batch 256 x 152k vocab this matters), with logprobs of the raw logits.
void sample_on_host(std::vector<StepRow>& rows, int64_t vocab) {
  std::vector<StepRow*> host;
  for (StepRow& rw : rows)
    if (rw.logits != nullptr) host.push_back(&rw);
  ThreadPool::global().parallel_for(static_cast<int64_t>(host.size()), 1, [&](int64_t r0, int64_t r1) {
    std::vector<float> logprobs;
    for (int64_t r = r0; r < r1; ++r) {
      StepRow& rw = *host[static_cast<size_t>(r)];
      Live& l = *rw.live;
      // The sampler applies penalties in place: sample from the row the step owns.
      std::span<float> lg(rw.logits, static_cast<size_t>(vocab));
      const bool score = !l.sampling.score_tokens.empty() && l.output.empty();
      if (l.sampling.top_logprobs >= 0 || score) log_softmax(lg, logprobs);
      if (score)
        for (int32_t t : l.sampling.score_tokens) rw.scored.push_back({t, logprobs[static_cast<size_t>(t)]});
      rw.gt.token = l.sampler->sample(lg, l.prompt, l.output);
      if (l.sampling.top_logprobs < 0) continue;
      rw.gt.logprob = logprobs[static_cast<size_t>(rw.gt.token)];
      const int n = std::min<int>(l.sampling.top_logprobs, static_cast<int>(vocab));
      if (n <= 0) continue;
      std::vector<int32_t> idx(static_cast<size_t>(vocab));
      for (int32_t v = 0; v < vocab; ++v) idx[static_cast<size_t>(v)] = v;
      std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), [&](int32_t a, int32_t b) {
        return logprobs[static_cast<size_t>(a)] > logprobs[static_cast<size_t>(b)];
      });
      for (int k = 0; k < n; ++k) rw.gt.top.push_back({idx[static_cast<size_t>(k)], logprobs[static_cast<size_t>(idx[static_cast<size_t>(k)])]});
    }
  });
}

Status EngineImpl::step() {
  using SteadyClock = std::chrono::steady_clock;
  const auto t_begin = SteadyClock::now();
  sched::ScheduledBatch batch = sched_->schedule();
  if (batch.empty()) return Status::ok();
  fill_step_batch(batch, step_);
  // One row per sequence that finished its prompt / produced a token this step.
  std::vector<StepRow> rows;
  {
    size_t r = 0;
    for (const auto& s : batch.seqs) {
      if (!s.needs_logits) continue;
      auto it = live_.find(s.id);
      if (it != live_.end()) rows.push_back({s.id, r, &it->second, {}});
      ++r;
    }
  }
  const auto t_forward = SteadyClock::now();
  Status st = run_model(rows);
  const auto t_output = SteadyClock::now();
  schedule_s_ += std::chrono::duration<double>(t_forward - t_begin).count();
  const double forward = std::chrono::duration<double>(t_output - t_forward).count();
  forward_s_ += forward;
  if (batch.n_tokens == static_cast<int32_t>(batch.seqs.size())) {  // one token a sequence
    ++decode_steps_;
    decode_step_tokens_ += batch.n_tokens;
    decode_forward_s_ += forward;
  }
  if (!st.is_ok()) {
    // Drop every sequence of the batch; the scheduler still needs its step completed.
    std::vector<sched::SampledToken> none;
    for (const auto& s : batch.seqs) (void)sched_->cancel(s.id);
    (void)sched_->on_step_done(none);
    fail_batch(batch, st);
    return st;
  }
  sample_on_host(rows, model_->config().vocab_size);
  st = emit(rows);
  output_s_ += std::chrono::duration<double>(SteadyClock::now() - t_output).count();
  return st;
}

// Runs the model on step_: with device sampling, ids for every row and logits only for the
// rows that need the host sampler; otherwise logits for every row. Sets each row's token or
// logits.
Status EngineImpl::run_model(std::vector<StepRow>& rows) {
  const int64_t vocab = model_->config().vocab_size;
  model::StepBatch& b = step_;
  const size_t R = b.logits_rows.size();
  if (!device_sampling_) {
    logits_.resize(R * static_cast<size_t>(vocab));
    FRUGAL_RETURN_IF_ERROR(model_->forward(b.view(), *kv_, logits_.data()));
    for (StepRow& rw : rows) rw.logits = logits_.data() + rw.logits_row * static_cast<size_t>(vocab);
    return Status::ok();
  }
  b.temperature.assign(R, 0.f);  // rows of sequences no longer live sample greedily and are dropped
  b.top_p.assign(R, 1.f);
  b.top_k.assign(R, 0);
  b.seeds.assign(R, 0);
  ids_.assign(R, 0);
  host_rows_.clear();
  for (const StepRow& rw : rows) {
    const Live& l = *rw.live;
    if (l.host_sampling) {
      host_rows_.push_back(static_cast<int32_t>(rw.logits_row));
      continue;
    }
    b.temperature[rw.logits_row] = l.sampling.temperature;
    b.top_p[rw.logits_row] = l.sampling.top_p;
    b.top_k[rw.logits_row] = l.sampling.top_k;
    b.seeds[rw.logits_row] = mix64(l.seed + 0x9e3779b97f4a7c15ull * (l.output.size() + 1));
  }
  logits_.resize(host_rows_.size() * static_cast<size_t>(vocab));
  // May pad step_ in place (a graph replay): nothing below reads it.
  FRUGAL_RETURN_IF_ERROR(model_->forward_sample(b, *kv_, ids_.data(), host_rows_, logits_.data()));
  size_t h = 0;
  for (StepRow& rw : rows) {
    if (rw.live->host_sampling) {
      rw.logits = logits_.data() + (h++) * static_cast<size_t>(vocab);
    } else {
      rw.gt.token = ids_[rw.logits_row];
    }
  }
  return Status::ok();
}

// Completes the step in the scheduler, publishes stats, then hands each request its token
// (eos / stop tokens are not emitted) and final state.
Status EngineImpl::emit(std::vector<StepRow>& rows) {
  std::vector<sched::SampledToken> sampled;
  std::unordered_map<uint64_t, GeneratedToken> emitted;
  std::unordered_map<uint64_t, std::vector<TokenLogprob>> scored;
  for (auto& rw : rows) {
    rw.live->output.push_back(rw.gt.token);
    sampled.push_back({rw.id, rw.gt.token});
    emitted.emplace(rw.id, std::move(rw.gt));
    if (!rw.scored.empty()) scored.emplace(rw.id, std::move(rw.scored));
  }
  auto finished = sched_->on_step_done(sampled);
  if (!finished.is_ok()) return finished.status().with_context("engine: scheduler rejected the step");
  std::unordered_map<uint64_t, const sched::FinishedSeq*> fin;
  for (const auto& f : *finished) fin.emplace(f.id, &f);
  // Stats first, so a caller that sees its final output also sees its blocks released.
  const EngineStats snapshot = publish_stats();
  if (opts_.step_observer) opts_.step_observer(snapshot);

  for (auto& [id, gt] : emitted) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    RequestOutput out;
    out.request_id = id;
    out.prompt_tokens = static_cast<int32_t>(it->second.prompt.size());
    if (auto sc = scored.find(id); sc != scored.end()) out.scored = std::move(sc->second);
    auto f = fin.find(id);
    const bool stop_token = f != fin.end() && f->second->reason != sched::FinishReason::kLength;
    if (!stop_token) out.tokens.push_back(std::move(gt));
    if (f != fin.end()) {
      out.finish = stop_token ? FinishReason::kStop : FinishReason::kLength;
      out.cached_prompt_tokens = std::max(0, f->second->n_cached_prompt);
    }
    it->second.cb(out);
    if (f != fin.end()) {
      live_.erase(it);
      --queued_;
    }
  }
  return Status::ok();
}

EngineStats EngineImpl::publish_stats() {
  auto s = sched_->stats();
  int64_t inbox_size;
  {
    std::lock_guard<std::mutex> lk(mu_);
    inbox_size = static_cast<int64_t>(inbox_.size());
  }
  std::lock_guard<std::mutex> lk(stats_mu_);
  stats_.running = s.n_running;
  stats_.waiting = s.n_waiting + inbox_size;
  stats_.kv_blocks_total = s.n_blocks_total;
  stats_.kv_blocks_used = s.n_blocks_used;
  stats_.kv_fragmentation = s.fragmentation;
  stats_.prefix_cache_queries = s.n_prefix_queried_blocks;
  stats_.prefix_cache_hits = s.n_prefix_hit_blocks;
  stats_.preemptions = s.n_preemptions;
  stats_.kv_window_released_blocks = s.n_window_released_blocks;
  stats_.prompt_tokens_total = s.n_prompt_tokens;
  stats_.generation_tokens_total = s.n_generated_tokens;
  stats_.steps = s.n_steps;
  stats_.graph_steps = model_->graph_replays();
  stats_.schedule_s = schedule_s_;
  stats_.forward_s = forward_s_;
  stats_.decode_steps = decode_steps_;
  stats_.decode_step_tokens = decode_step_tokens_;
  stats_.decode_forward_s = decode_forward_s_;
  stats_.prepare_s = model_->prepare_seconds();
  stats_.output_s = output_s_;
  return stats_;
}

bool EngineImpl::replicate_step(bool leader) {
  std::deque<Pending> inbox;
  std::vector<uint64_t> cancels;
  int64_t hdr[2] = {0, 0};  // [payload bytes, stop]
  StepWire w;
  if (leader) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !inbox_.empty() || !cancels_.empty() || sched_->has_unfinished(); });
      inbox.swap(inbox_);
      cancels.swap(cancels_);
      hdr[1] = stop_ ? 1 : 0;
    }
    // An unseeded request gets its seed here, so every rank samples it alike.
    for (auto& p : inbox)
      if (!p.req.sampling.seed) p.req.sampling.seed = (static_cast<uint64_t>(random_seed_()) << 32) ^ random_seed_();
    w.put(static_cast<uint64_t>(inbox.size()));
    for (const auto& p : inbox) w.put_request(p);
    w.put(static_cast<uint64_t>(cancels.size()));
    for (uint64_t id : cancels) w.put(id);
    hdr[0] = static_cast<int64_t>(w.bytes.size());
  }
  Status st = comm_->broadcast_host_waiting(hdr, sizeof hdr, 0);  // the other ranks may wait long (an idle server)
  if (st.is_ok() && !leader) w.bytes.resize(static_cast<size_t>(hdr[0]));
  if (st.is_ok() && hdr[0] > 0) st = comm_->broadcast_host(w.bytes.data(), hdr[0], 0);
  if (!st.is_ok()) {
    FRUGAL_LOG_ERROR("engine: tensor-parallel step from rank 0: {}", st.to_string());
    admit(inbox, cancels);  // rank 0's requests end as cancelled at shutdown
    return false;
  }
  if (!leader) {
    StepWireReader r(w.bytes);
    uint64_t n = 0, nc = 0;
    bool ok = r.get(&n);
    for (uint64_t i = 0; ok && i < n; ++i) {
      Pending p;
      ok = r.get_request(&p);
      p.cb = [](const RequestOutput&) {};  // rank 0 answers the client
      ++queued_;
      inbox.push_back(std::move(p));
    }
    ok = ok && r.get(&nc);
    for (uint64_t i = 0; ok && i < nc; ++i) {
      uint64_t id = 0;
      ok = r.get(&id);
      cancels.push_back(id);
    }
    if (!ok || !r.done()) {
      FRUGAL_LOG_ERROR("engine: tensor-parallel step from rank 0: malformed ({} bytes)", w.bytes.size());
      return false;
    }
  }
  admit(inbox, cancels);
  return hdr[1] == 0;
}

void EngineImpl::thread_main() {
  const bool leader = !comm_ || comm_->rank() == 0;
  for (;;) {
    if (comm_ && opts_.tp_replicate_requests) {
      if (!replicate_step(leader)) break;
    } else {
      // Tensor parallel: rank 0 decides how many submitted requests this step admits and when to
      // stop, and tells the others; with the same requests in the same order every rank's
      // scheduler then builds the same batches (their collectives must line up).
      int64_t ctl[2] = {-1, 0};  // [requests to admit (-1: all), stop]
      if (leader) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !inbox_.empty() || !cancels_.empty() || sched_->has_unfinished(); });
        ctl[0] = comm_ ? static_cast<int64_t>(inbox_.size()) : -1;
        ctl[1] = stop_ ? 1 : 0;
      }
      if (comm_) {
        if (Status st = comm_->broadcast_host(ctl, sizeof ctl, 0); !st.is_ok()) {
          FRUGAL_LOG_ERROR("engine: tensor-parallel step control: {}", st.to_string());
          break;
        }
      }
      if (ctl[1] != 0) break;
      drain_inbox(ctl[0]);
    }
    if (sched_->has_unfinished()) {
      const int64_t steps_before = sched_->stats().n_steps;
      Status st = step();
      if (!st.is_ok()) FRUGAL_LOG_ERROR("engine: {}", st.to_string());
      // Nothing schedulable (all waiting, no blocks yet): don't spin hot.
      if (sched_->stats().n_steps == steps_before) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    publish_stats();
  }
  // Shutdown: everything still live is cancelled.
  drain_inbox();
  for (auto& [id, l] : live_) {
    (void)sched_->cancel(id);
    RequestOutput out;
    out.request_id = id;
    out.finish = FinishReason::kCancelled;
    out.prompt_tokens = static_cast<int32_t>(l.prompt.size());
    l.cb(out);
  }
  live_.clear();
  publish_stats();
  const int64_t steps = sched_->stats().n_steps;
  if (steps > 0) {
    const double us = 1e6 / static_cast<double>(steps);
    FRUGAL_LOG_INFO("engine: {} steps ({} graph replays); per step: schedule {:.1f} us, forward {:.1f} us "
                    "(inputs {:.1f} us), outputs {:.1f} us",
                    steps, model_->graph_replays(), schedule_s_ * us, forward_s_ * us, model_->prepare_seconds() * us,
                    output_s_ * us);
  }
}

}  // namespace

Result<std::unique_ptr<Engine>> create_engine(const EngineOptions& opts) {
  auto e = std::make_unique<EngineImpl>();
  FRUGAL_RETURN_IF_ERROR(e->init(opts));
  return std::unique_ptr<Engine>(std::move(e));
}

}  // namespace frugal::runtime
