// A loaded model: config, generation defaults, weights on a backend, and forward().
//
//   auto model = Model::load(dir, backend, LoadOptions{.dummy_weights = true});
//   auto kv = KvStorage::create(backend, model->config(), {.n_blocks = 64});
//   model->forward(batch, *kv, logits);   // logits: host [n_logit_rows, vocab] f32
//
// Debug taps (set_taps_enabled): after each forward, named intermediates are copied to the
// host as f32 [n_tokens, width]:
//   "embed"            token embeddings (transformers' hidden_states[0])
//   "blk.{i}.attn_out" residual stream after layer i's attention block
//   "blk.{i}.out"      residual stream after layer i (hidden_states[i + 1] for i < L - 1)
//   "out_norm"         final norm output (hidden_states[L])
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/arch.h"
#include "model/config.h"
#include "model/forward_batch.h"
#include "model/generation_config.h"
#include "model/kv_storage.h"
#include "model/runner.h"
#include "model/shard.h"
#include "model/step_batch.h"
#include "model/weights.h"
#include "ops/backend.h"

namespace frugal::dist {
class Communicator;
}

namespace frugal::model {

struct LoadOptions {
  bool dummy_weights = false;
  uint64_t seed = 0;               // dummy weights
  DummyPrecision dummy_precision = DummyPrecision::kDense;  // dummy weights' linears (weights.h)
  DummyPrecision dummy_lm_head = DummyPrecision::kDense;    // dummy weights' untied lm_head (kDense or kInt8)
  int32_t max_batch_tokens = 512;  // activation buffers are sized for this many tokens
  int32_t max_seqs = 64;
  int32_t max_logit_rows = 64;
  int32_t max_context = 0;         // 0: max_position_embeddings; sizes block tables
  int32_t block_size = 16;         // smallest block size block tables are sized for
  // --kv-window W --kv-sinks S (docs/kv_cache.md): every layer attends to the first S and the
  // last W positions only. A model with a native sliding window keeps its own (W, S ignored).
  int32_t kv_window = 0;           // 0: off
  int32_t kv_sinks = 0;            // needs kv_window > 0
  // Tensor parallelism (docs/parallelism.md): this rank's communicator, not owned (it outlives
  // the model). nullptr or world size 1: the whole model on this backend. Otherwise the model
  // loads rank comm->rank()'s shard (model/shard.h) and its forward runs the collectives; every
  // rank must call forward with the same batch, and each gets the whole logits.
  dist::Communicator* comm = nullptr;
};

class Model {
 public:
  // `path` is a model directory, or (dummy weights only) a config.json file.
  static Result<std::unique_ptr<Model>> load(const std::string& path, ops::Backend* backend,
                                             const LoadOptions& opts);
  ~Model();

  const ModelConfig& config() const { return config_; }
  // This rank's config (model/shard.h local_config): its query / KV heads and intermediate
  // size. KV storage for this model is made from it. config() when not tensor-parallel.
  const ModelConfig& local_config() const { return local_config_; }
  // What this rank holds of the split dimensions (rank 0 of 1 holds everything).
  const RankLayout& rank_layout() const { return layout_; }
  const GenerationConfig& generation_config() const { return generation_; }
  const LoadOptions& options() const { return opts_; }
  ops::Backend* backend() const { return backend_; }
  int64_t weight_bytes() const { return weights_->bytes(); }
  // Loaded weight bytes by role and format (embedding, attention, mlp, lm_head, router, ...).
  const std::vector<WeightRoleBytes>& weight_bytes_by_role() const { return weights_->bytes_by_role(); }
  // Device bytes of the step workspace (activations, logits, step inputs), fixed at load.
  int64_t workspace_bytes() const { return runner_->workspace_bytes(); }
  int32_t max_context() const { return runner_->limits().max_context; }
  // The step executor (runner.h): everything below forwards to it.
  ModelRunner& runner() { return *runner_; }

  // Runs one step; writes each logits row (f32, [batch.logits_rows.size(), vocab]) to the host.
  Status forward(const ForwardBatch& batch, KvStorage& kv, float* logits) { return runner_->forward(batch, kv, logits); }

  // Runs one step and samples one token per logits row where the logits are (the backend's
  // sample op), copying only the ids to `ids` [batch.logits_rows.size()]. Rows listed in
  // `host_rows` (indices into logits_rows, for host-side sampling with penalties or
  // logprobs) also get their f32 logits copied to host_logits [host_rows.size(), vocab].
  // Decode-only steps run as one replayed step graph per (batch bucket, context bucket) when
  // graphs are enabled and the backend has them.
  Status forward_sample(const ForwardBatch& batch, KvStorage& kv, const SamplingBatch& sampling, int32_t* ids,
                        std::span<const int32_t> host_rows, float* host_logits) {
    return runner_->forward_sample(batch, kv, sampling, ids, host_rows, host_logits);
  }
  // The same for a StepBatch holding its sampling arrays; pads `batch` in place for graphs.
  Status forward_sample(StepBatch& batch, KvStorage& kv, int32_t* ids, std::span<const int32_t> host_rows,
                        float* host_logits) {
    return runner_->forward_sample(batch, kv, ids, host_rows, host_logits);
  }
  bool supports_sampling() const { return runner_->supports_sampling(); }
  // The attention window every layer uses (0: some layer sees the whole context) and its sink
  // tokens: then a sequence's blocks behind the window that hold no sink can be freed
  // (sched::SchedulerConfig::kv_window). Llama-family layers only; MLA ignores windows.
  int32_t all_layers_window() const { return all_layers_window_; }
  int32_t all_layers_sinks() const { return all_layers_window_ > 0 ? static_cast<int32_t>(config_.attention_sink_tokens) : 0; }
  void set_graphs_enabled(bool on) { runner_->set_graphs_enabled(on); }
  // Steps run by graph replay / eagerly since load (for benchmarks and tests).
  int64_t graph_replays() const { return runner_->graph_replays(); }
  int64_t eager_steps() const { return runner_->eager_steps(); }
  // Matmul groups (q/k/v, gate/up) run as one fused matmul because their weights are adjacent.
  int32_t fused_matmuls() const { return runner_->fused_matmuls(); }
  // Host seconds spent checking, padding and uploading step inputs (cumulative).
  double prepare_seconds() const { return runner_->prepare_seconds(); }

  void set_taps_enabled(bool on) { runner_->taps().set_enabled(on); }
  // A tap of the last forward, f32 [n_tokens, width]; nullptr if not recorded.
  const std::vector<float>* tap(const std::string& name) const { return runner_->taps().get(name); }

 private:
  Model() = default;

  ModelConfig config_;
  ModelConfig local_config_;
  RankLayout layout_;
  GenerationConfig generation_;
  LoadOptions opts_;
  ops::Backend* backend_ = nullptr;
  int32_t all_layers_window_ = 0;
  std::unique_ptr<WeightStore> weights_;
  std::unique_ptr<ModelRunner> runner_;  // destroyed before the weights its family views
};

}  // namespace frugal::model
