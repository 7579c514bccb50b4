// The seam between a model family and the ModelRunner (runner.h). A family is "weights bound
// from the arch table + a forward body": it declares the device buffers its forward needs
// for the runner's limits, gets them back from the runner's one arena, and enqueues one
// step's ops given device pointers to that step's inputs. Everything per step (validation,
// packing, graph-bucket padding, capture and replay, sampling, counters) is the runner's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/arch.h"
#include "model/config.h"
#include "model/kv_storage.h"
#include "model/layers/attention.h"
#include "model/shard.h"
#include "model/taps.h"
#include "model/weights.h"
#include "ops/backend.h"

namespace frugal::dist {
class Communicator;
}

namespace frugal::model {

// What a runner is sized for (from LoadOptions): a step has at most max_batch_tokens tokens,
// max_seqs sequences and max_logit_rows logits rows; block tables cover max_context tokens in
// blocks of at least block_size.
struct RunnerLimits {
  int32_t max_batch_tokens = 512;
  int32_t max_seqs = 64;
  int32_t max_logit_rows = 64;
  int32_t max_context = 0;
  int32_t block_size = 16;
};

// One named device buffer of a family's workspace (a DeepSeek family asks for its latent and
// router buffers here, a Llama one for q/k/v and MLP scratch).
struct BufferRequest {
  std::string name;  // for reports and errors: "resid", "gate", ...
  int64_t bytes = 0;
};

// What one forward body sees of a step. All pointers are device memory in the runner's arena
// and stay the same for every step of the same shape (so a captured graph replays them).
struct StepContext {
  ops::Backend* backend = nullptr;
  DType act = DType::kF32;        // activation dtype (the backend's)
  layers::StepInputs in;          // positions, slots, q_start, ctx_len, block tables, inv_freq
  const int32_t* tokens = nullptr;       // [n_tokens]
  const int32_t* logits_rows = nullptr;  // [n_logits_rows] token indices
  int64_t n_logits_rows = 0;
  float* logits = nullptr;        // [n_logits_rows, vocab] f32: the forward's output
  Taps* taps = nullptr;           // never null

  // Records tap `name` ([rows, width], contiguous) when taps are enabled.
  Status tap(const std::string& name, const void* data, int64_t rows, int64_t width) const {
    return taps->enabled() ? taps->record(name, data, rows, width, width) : Status{};
  }
  // The same for f32 data (router logits and weights, whatever the activation dtype).
  Status tap_f32(const std::string& name, const float* data, int64_t rows, int64_t width) const {
    return taps->enabled() ? taps->record(name, data, rows, width, width, DType::kF32) : Status{};
  }
};

class ForwardFamily {
 public:
  virtual ~ForwardFamily() = default;
  // The buffers the forward needs for any step within `limits`, in activation dtype `act`.
  virtual std::vector<BufferRequest> workspace(const RunnerLimits& limits, DType act) const = 0;
  // The runner's device pointers for those buffers, in the same order (called once).
  virtual void bind_workspace(std::span<void* const> buffers) = 0;
  // Enqueues one step: logits of step.logits_rows into step.logits. May only enqueue ops
  // (it is captured into graphs), except for taps.
  virtual Status forward(const StepContext& step, KvStorage& kv) = 0;
  // Matmul groups run fused because their weights are adjacent (for tests).
  virtual int32_t fused_matmuls() const { return 0; }
};

// What a family builds itself from (Model::load); the weights outlive the family. The backend
// is for weights a family derives once at load (DeepSeek's absorbed MLA query weight).
// Tensor parallel: `config` is the rank's local config (model/shard.h), `full` the model's,
// `layout` the rank's slices and `comm` its communicator (world 1: config == full, no comm).
struct FamilyInputs {
  const ModelConfig& config;
  const ArchInfo& arch;
  const WeightStore& weights;
  ops::Backend* backend = nullptr;
  const ModelConfig* full = nullptr;
  const RankLayout* layout = nullptr;
  dist::Communicator* comm = nullptr;
};

}  // namespace frugal::model
