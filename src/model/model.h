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
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/arch.h"
#include "model/config.h"
#include "model/forward_batch.h"
#include "model/generation_config.h"
#include "model/kv_storage.h"
#include "model/weights.h"
#include "ops/backend.h"

namespace frugal::model {

struct LoadOptions {
  bool dummy_weights = false;
  uint64_t seed = 0;               // dummy weights
  int32_t max_batch_tokens = 512;  // activation buffers are sized for this many tokens
  int32_t max_seqs = 64;
  int32_t max_logit_rows = 64;
  int32_t max_context = 0;         // 0: max_position_embeddings; sizes block tables
  int32_t block_size = 16;         // smallest block size block tables are sized for
};

class Model {
 public:
  // `path` is a model directory, or (dummy weights only) a config.json file.
  static Result<std::unique_ptr<Model>> load(const std::string& path, ops::Backend* backend,
                                             const LoadOptions& opts);
  virtual ~Model();

  const ModelConfig& config() const { return config_; }
  const GenerationConfig& generation_config() const { return generation_; }
  const LoadOptions& options() const { return opts_; }
  ops::Backend* backend() const { return backend_; }
  int64_t weight_bytes() const { return weights_->bytes(); }
  // Device bytes of the step workspace (activations, logits, step inputs), fixed at load.
  int64_t workspace_bytes() const { return workspace_bytes_; }
  int32_t max_context() const { return max_context_; }

  // Runs one step; writes each logits row (f32, [batch.logits_rows.size(), vocab]) to the host.
  virtual Status forward(const ForwardBatch& batch, KvStorage& kv, float* logits) = 0;

  // Runs one step and samples one token per logits row where the logits are (the backend's
  // sample op), copying only the ids to `ids` [batch.logits_rows.size()]. Rows listed in
  // `host_rows` (indices into logits_rows, for host-side sampling with penalties or
  // logprobs) also get their f32 logits copied to host_logits [host_rows.size(), vocab].
  // Decode-only steps run as one replayed step graph per (batch bucket, context bucket) when
  // graphs are enabled and the backend has them.
  virtual Status forward_sample(const ForwardBatch& batch, KvStorage& kv, const SamplingBatch& sampling,
                                int32_t* ids, std::span<const int32_t> host_rows, float* host_logits) = 0;
  bool supports_sampling() const { return backend_->supports_sample(); }
  void set_graphs_enabled(bool on) { graphs_enabled_ = on; }
  // Steps run by graph replay / eagerly since load (for benchmarks and tests).
  int64_t graph_replays() const { return graph_replays_; }
  int64_t eager_steps() const { return eager_steps_; }
  // Matmul groups (q/k/v, gate/up) run as one fused matmul because their weights are adjacent.
  int32_t fused_matmuls() const { return fused_matmuls_; }
  // Host seconds spent checking, padding and uploading step inputs (cumulative).
  double prepare_seconds() const { return prepare_s_; }

  void set_taps_enabled(bool on) { taps_enabled_ = on; }
  // A tap of the last forward, f32 [n_tokens, width]; nullptr if not recorded.
  const std::vector<float>* tap(const std::string& name) const;

 protected:
  Model() = default;
  // Checks a batch against the model's limits and the KV storage; errors name the field.
  Status validate(const ForwardBatch& b, const KvStorage& kv) const;
  // Copies device rows [rows, width] (leading dimension ld, activation dtype) into tap `name`.
  Status record_tap(const std::string& name, const void* data, int64_t rows, int64_t width, int64_t ld);
  bool taps_enabled() const { return taps_enabled_; }
  bool graphs_enabled() const { return graphs_enabled_; }

  ModelConfig config_;
  GenerationConfig generation_;
  LoadOptions opts_;
  ops::Backend* backend_ = nullptr;
  std::unique_ptr<WeightStore> weights_;
  int32_t max_context_ = 0;
  int64_t graph_replays_ = 0;
  int64_t eager_steps_ = 0;
  double prepare_s_ = 0;
  int32_t fused_matmuls_ = 0;
  int64_t workspace_bytes_ = 0;

 private:
  bool graphs_enabled_ = true;
  bool taps_enabled_ = false;
  std::map<std::string, std::vector<float>> taps_;
  std::vector<uint8_t> tap_staging_;
};

}  // namespace frugal::model
