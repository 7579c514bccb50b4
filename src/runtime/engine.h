// The engine API: what the CLI, the server and the benchmarks use to generate.
//
// An Engine owns one model, its device, the KV block pool and the scheduler, all driven by one
// engine thread (docs/engine_contract.md). Callers submit requests from any thread; outputs come
// back through a per-request callback that runs ON THE ENGINE THREAD, so it must be cheap and
// non-blocking (copy the event, post it to your own executor/queue, return).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "dist/communicator.h"
#include "model/weights.h"

namespace frugal::runtime {

struct SamplingParams {
  float temperature = 1.0f;  // 0 => greedy
  float top_p = 1.0f;
  int32_t top_k = 0;         // 0 => off
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;  // unset => engine picks one (non-reproducible)
  int32_t max_tokens = 16;
  std::vector<int32_t> stop_token_ids;  // in addition to the model's eos ids
  bool ignore_eos = false;
  int32_t top_logprobs = -1;  // -1: no logprobs; 0: chosen token's only; n: also top-n
  // Token ids whose log-probabilities (of the raw logits, as logprobs) at the last prompt
  // position are wanted, to score a continuation (frugal eval mc). They come back in
  // RequestOutput::scored with the first token, even when that is a stop token. Sampled on
  // the host.
  std::vector<int32_t> score_tokens;
};

struct GenerateRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
};

enum class FinishReason {
  kNone,       // still running
  kStop,       // eos or a stop token id (the stop token is not emitted)
  kLength,     // max_tokens reached, or the context is full
  kCancelled,  // cancel() or client gone
  kError,      // see RequestOutput::error
};
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

struct GeneratedToken {
  int32_t token = 0;
  float logprob = 0;                     // valid when top_logprobs >= 0
  std::vector<TokenLogprob> top;         // top-n alternatives when top_logprobs > 0
};

// One callback invocation: zero or more new tokens, and the finish state.
struct RequestOutput {
  uint64_t request_id = 0;
  std::vector<GeneratedToken> tokens;
  FinishReason finish = FinishReason::kNone;
  Status error;                 // set when finish == kError
  int32_t prompt_tokens = 0;    // always set
  int32_t cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache
  // SamplingParams::score_tokens' log-probabilities at the last prompt position, in order; set
  // on the output of the step that sampled the first token.
  std::vector<TokenLogprob> scored;
};

using OutputCallback = std::function<void(const RequestOutput&)>;

// Counters and gauges for /metrics and benchmarks (a consistent snapshot).
struct EngineStats {
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;
  double kv_fragmentation = 0;   // allocated slots not holding a token / allocated slots
  int64_t prefix_cache_queries = 0;  // full prompt blocks looked up
  int64_t prefix_cache_hits = 0;
  int64_t preemptions = 0;
  int64_t kv_window_released_blocks = 0;  // blocks returned behind the window (--kv-window)
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t steps = 0;
  int64_t graph_steps = 0;       // steps replayed from a captured step graph
  // Decode steps: every sequence of the step computes one token (a one-token prompt counts), and
  // their tokens and model-call seconds (part of forward_s): the rest are prefill or mixed steps.
  int64_t decode_steps = 0;
  int64_t decode_step_tokens = 0;
  double decode_forward_s = 0;
  // Where the engine thread's time went (cumulative seconds): building the step (scheduler,
  // batch layout), the model call (input upload, launches, waiting for the ids), its input
  // preparation alone (part of forward_s), and handing tokens to the requests' callbacks.
  double schedule_s = 0;
  double forward_s = 0;
  double prepare_s = 0;
  double output_s = 0;
};

struct MemoryReport {
  int64_t weights_bytes = 0;
  // The weights by role (embedding, attention, mlp, lm_head, router, norm, bias) and format.
  std::vector<model::WeightRoleBytes> weights_by_role;
  int64_t kv_pool_bytes = 0;
  std::string kv_dtype;             // the KV cache dtype (kv::kv_dtype_label: bf16, fp8, int8, f32)
  int64_t kv_bytes_per_token = 0;   // kv::bytes_per_token of the pool's geometry, scales included
  int64_t kv_capacity_tokens = 0;   // tokens the pool holds: n_blocks * block_size
  int64_t workspace_bytes = 0;
  int64_t graphs_bytes = 0;
};

struct EngineOptions {
  std::string model_dir;        // HF directory, or a config.json with dummy_weights
  bool dummy_weights = false;
  // Dummy weights' linears: "bf16" (the config's dtype) | "int8" | "int4" | "fp8" | "nf4"
  // (model::dummy_linear_format). Checkpoints load in the format they are stored in.
  std::string weight_precision = "bf16";
  // Dummy weights' untied lm_head: "bf16" (the config's dtype) | "int8" (per channel, what
  // `frugal plan --lm-head int8` counts). A checkpoint's lm_head loads as stored.
  std::string lm_head_precision = "bf16";
  std::string device = "cpu";   // "cpu" | "cuda" | "cuda:N" | "ref"
  int32_t threads = 0;          // CPU threads, 0 = all
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 8192;
  int32_t max_model_len = 0;    // 0 = the model's max_position_embeddings
  int32_t block_size = 16;
  // KV cache element type: "auto" (the activation dtype: f32 on the CPU, bf16 on CUDA), "bf16",
  // "fp8" (e4m3, per-layer scales) or "int8" (per token and kv head scales); docs/kv_cache.md.
  std::string kv_cache_dtype = "auto";
  // Attention over the first kv_sinks and the last kv_window positions only (model::LoadOptions;
  // 0 = off). The pool still holds whole sequences: blocks are not yet freed behind the window.
  int32_t kv_window = 0;
  int32_t kv_sinks = 0;
  int32_t num_kv_blocks = 0;    // 0 = size from memory (gpu_memory_utilization / cpu budget)
  double gpu_memory_utilization = 0.90;
  int64_t cpu_kv_budget_bytes = 1ll << 30;
  bool enable_prefix_caching = true;
  bool enable_chunked_prefill = true;
  int32_t max_prefill_chunk_tokens = 0;  // cap on one sequence's prefill chunk per step (0 = none)
  // Prompts longer than the threshold get at most long_prefill_chunk_tokens per step while
  // decodes share the step (sched::SchedulerConfig; chunk 0 = off).
  int32_t long_prefill_token_threshold = 1024;
  int32_t long_prefill_chunk_tokens = 64;
  int32_t max_queue = 4096;     // waiting requests beyond this are refused (kResourceExhausted)
  // Where tokens are sampled: "auto" (on the device for device backends, else on the host),
  // "device" (the backend's sample op wherever it has one) or "host". Requests with penalties,
  // min_p or logprobs are always sampled on the host from their downloaded logits row.
  std::string sampling = "auto";
  bool graphs = true;           // replay decode steps as step graphs where the backend has them
  // Called ON THE ENGINE THREAD after every executed step (a non-empty batch), with the stats
  // as of the end of that step (finished sequences already released). For benchmarks that need
  // every step's KV usage and fragmentation; must be cheap and must not call into the engine.
  std::function<void(const EngineStats&)> step_observer = nullptr;
  // Tensor parallelism (docs/parallelism.md). > 1: this process is one rank of a group started
  // by dist/launch.h (or mpirun / torchrun-style variables): CPU ranks talk over MPI, CUDA
  // ranks over NCCL on device cuda:LOCAL_RANK, meeting at rank_env's address. The engine owns
  // the rank's communicator. Every rank runs the same engine on the same requests (the same
  // sampling seeds): the schedule is deterministic, so the ranks' collectives line up.
  int32_t tensor_parallel_size = 1;
  dist::RankEnv rank_env;
  // Tensor parallel, for a server: requests and cancels reach rank 0 only. Each step rank 0
  // sends the requests it admits (prompt, sampling parameters, a seed it picks for unseeded
  // ones) and the cancels to the other ranks, whose engines run them unseen (submit() there is
  // an error) until rank 0 shuts down; shutdown() on another rank waits for that.
  bool tp_replicate_requests = false;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Queues a request; the callback gets every output, the last one with finish != kNone.
  // Errors (empty prompt, prompt longer than the context, bad parameters, queue full) come back
  // as a Status here, synchronously, and the callback is never called.
  virtual Result<uint64_t> submit(GenerateRequest req, OutputCallback cb) = 0;
  // Queues several requests at once: the engine thread takes them in one step, so a benchmark's
  // batch starts together instead of racing the first steps. All or none: when one is refused
  // (its index names it) none is queued and no callback is called. Ids come back in order.
  struct Submission {
    GenerateRequest req;
    OutputCallback cb;
  };
  virtual Result<std::vector<uint64_t>> submit_batch(std::vector<Submission> batch) = 0;
  // Cancels a request; its blocks are released within one step; its callback gets a final
  // output with kCancelled unless it already finished. Unknown ids are ignored.
  virtual void cancel(uint64_t request_id) = 0;
  virtual EngineStats stats() const = 0;
  virtual MemoryReport memory() const = 0;
  virtual int32_t max_model_len() const = 0;
  virtual int32_t vocab_size() const = 0;
  virtual std::vector<int32_t> eos_token_ids() const = 0;
  // Stops the engine thread after finishing nothing more: running requests get kCancelled.
  virtual void shutdown() = 0;
};

// Loads the model and starts the engine thread.
Result<std::unique_ptr<Engine>> create_engine(const EngineOptions& opts);

}  // namespace frugal::runtime
