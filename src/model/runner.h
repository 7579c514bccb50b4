// The ModelRunner (the nano-vllm shape): the one owner of a model's per-step device state. It
// checks a step against its limits, pads decode steps to a batch bucket, packs the step's
// inputs into one upload, runs the family's forward eagerly or as a captured/replayed step
// graph, samples on the device and copies back only ids and the rows sampled on the host.
// It allocates one workspace arena: the family's declared buffers plus its own (logits,
// packed step inputs, rope inv_freq). Tensor parallelism will hold one runner per rank.
//
//   auto runner = ModelRunner::create(backend, config, limits, std::move(family));
//   runner->forward(batch.view(), kv, logits);            // all logits rows to the host
//   runner->forward_sample(batch, kv, ids, host_rows, host_logits);  // pads `batch` in place
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "model/family.h"
#include "model/forward_batch.h"
#include "model/kv_storage.h"
#include "model/step_batch.h"
#include "model/taps.h"
#include "ops/backend.h"

namespace frugal::model {

class ModelRunner {
 public:
  static Result<std::unique_ptr<ModelRunner>> create(ops::Backend* backend, const ModelConfig& config,
                                                     const RunnerLimits& limits, std::unique_ptr<ForwardFamily> family);

  // Runs one step eagerly; writes each logits row (f32 [logits_rows.size(), vocab]) to the host.
  Status forward(const ForwardBatch& batch, KvStorage& kv, float* logits);

  // Runs one step and samples one token per logits row on the device (batch's sampling
  // arrays), copying the ids to `ids` [logits_rows.size()]. Rows listed in `host_rows`
  // (indices into logits_rows) also get their logits copied to host_logits [host_rows.size(),
  // vocab]. A decode-only step runs as one replayed graph per (batch bucket, block-table
  // width) when graphs are on and the backend has them; such a step pads `batch` in place
  // (its arrays are longer afterwards: use only what was computed before the call).
  Status forward_sample(StepBatch& batch, KvStorage& kv, int32_t* ids, std::span<const int32_t> host_rows,
                        float* host_logits);
  // The same for a batch held elsewhere (copies it when it must pad).
  Status forward_sample(const ForwardBatch& batch, KvStorage& kv, const SamplingBatch& sampling, int32_t* ids,
                        std::span<const int32_t> host_rows, float* host_logits);

  // Checks a batch against the limits and the KV storage; errors name the field.
  Status validate(const ForwardBatch& b, const KvStorage& kv) const;

  bool supports_sampling() const { return backend_->supports_sample(); }
  void set_graphs_enabled(bool on) { graphs_enabled_ = on; }
  Taps& taps() { return taps_; }
  const Taps& taps() const { return taps_; }
  const RunnerLimits& limits() const { return limits_; }
  // Steps run by graph replay / eagerly since creation.
  int64_t graph_replays() const { return graph_replays_; }
  int64_t eager_steps() const { return eager_steps_; }
  // Host seconds spent checking, padding and uploading step inputs (cumulative, forward_sample).
  double prepare_seconds() const { return prepare_s_; }
  // Device bytes of the arena (the family's buffers, logits, step inputs), fixed at creation.
  int64_t workspace_bytes() const { return workspace_bytes_; }
  int32_t fused_matmuls() const { return family_->fused_matmuls(); }

 private:
  // Device pointers of one step's inputs and outputs (inside the arena).
  struct StepBuffers {
    StepContext ctx;
    const float* temperature = nullptr;
    const int32_t* top_k = nullptr;
    const float* top_p = nullptr;
    const uint64_t* seeds = nullptr;
    int32_t* ids = nullptr;
  };

  ModelRunner(ops::Backend* backend, const ModelConfig& config, const RunnerLimits& limits,
              std::unique_ptr<ForwardFamily> family);
  Status allocate();
  Status sample_step(const ForwardBatch& b, const SamplingBatch& s, StepBatch* owner, KvStorage& kv, int32_t* ids,
                     std::span<const int32_t> host_rows, float* host_logits);
  int32_t graph_bucket(const ForwardBatch& b) const;
  int32_t graph_table_width(const ForwardBatch& b, int32_t block_size) const;
  Result<StepBuffers> upload_step(const ForwardBatch& b, const SamplingBatch* s, int32_t max_ctx_len);
  Status enqueue_sample(const StepBuffers& sb);
  Status finish_sample(const StepBuffers& sb, size_t n_rows, int32_t* ids, std::span<const int32_t> host_rows,
                       float* host_logits);
  int64_t table_capacity() const;
  int64_t ints_capacity() const;

  ops::Backend* backend_;
  ModelConfig config_;
  RunnerLimits limits_;
  std::unique_ptr<ForwardFamily> family_;
  Taps taps_;
  bool graphs_enabled_ = true;

  ops::DeviceBuffer arena_;
  int64_t workspace_bytes_ = 0;
  float* logits_ = nullptr;    // [max_logit_rows, vocab] f32
  int32_t* ints_ = nullptr;    // one step's packed inputs (ints_capacity() int32s)
  float* inv_freq_ = nullptr;  // [rotary_dim / 2]

  std::vector<int32_t> host_ints_;  // the packed upload, reused
  std::vector<float> inv_freq_host_;
  StepBatch padded_;                // a copy to pad, for batches the caller doesn't let us pad

  int64_t graph_replays_ = 0;
  int64_t eager_steps_ = 0;
  double prepare_s_ = 0;
};

}  // namespace frugal::model
