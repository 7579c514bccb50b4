// Weights as the forward pass sees them: typed views (Linear, Norm, Embedding) over device
// memory, and the WeightStore that owns that memory. On a backend that runs from host memory
// (the CPU), checkpoint tensors are used in place from the mmap; otherwise they are uploaded
// once into one device arena. Dummy weights are generated (seeded, multi-threaded) from the
// same tensor_specs list the loader checks checkpoints against.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "model/arch.h"
#include "model/safetensors.h"
#include "model/shard.h"
#include "ops/backend.h"
#include "ops/quant/quant_weight.h"

namespace frugal::model {

// y = x @ W^T + bias (HF nn.Linear). The weight carries its format (ops/weight_format.h: dtype,
// packing, groups, scale / zero-point tensors), which goes to the matmul as it is.
struct Linear {
  ops::WeightView weight;  // W [out, in] in weight.format (dense today: weight.data is [out, in])
  int64_t out = 0;
  int64_t in = 0;
  const void* bias = nullptr;    // optional [out], bias_dtype
  DType bias_dtype = DType::kF32;
};

// One Linear over several whose weights (and biases, if any) lie back to back in memory, in
// the order given: y = x @ [w0; w1; ...]^T computes every part's output side by side.
// nullopt when they are not contiguous (e.g. mmap'ed checkpoints on the CPU). Quantized parts
// fuse when their codes, scale rows and zero points are each back to back (as WeightStore
// places them), no scale block straddles two parts and there is no act-order permutation.
std::optional<Linear> fuse_rows(std::span<const Linear> parts);
// The order WeightStore places tensors on a device: groups q/k/v and gate/up (exposed for tests).
std::string placement_key(const std::string& name);

struct Norm {
  const void* weight = nullptr;  // [dim]
  DType dtype = DType::kF32;
  int64_t dim = 0;
};

struct Embedding {
  const void* table = nullptr;  // [vocab, dim]
  DType dtype = DType::kF32;
  int64_t vocab = 0;
  int64_t dim = 0;
};

// Precision of the dummy weights' linear projections (embeddings, norms, biases, lm_head and
// routers stay in `dtype`): the formats `frugal plan --precision` counts (dummy_linear_format).
enum class DummyPrecision : uint8_t { kDense, kInt8, kInt4, kFp8, kFp8Channel, kNf4 };
// "bf16" (or f16/f32: dense in that dtype) / "int8" / "int4" / "fp8" / "fp8-channel" / "nf4".
Result<DummyPrecision> parse_dummy_precision(const std::string& s);
const char* dummy_precision_name(DummyPrecision p);
// --lm-head: "bf16" (or f16/f32/dense: the config's dtype) -> kDense, "int8" -> kInt8 (per
// channel, as `frugal plan --lm-head int8` counts it); other formats are refused.
Result<DummyPrecision> parse_lm_head_precision(const std::string& s);
// The format of a dummy linear with k inputs (ops::quant_format): int8 per channel; int4 with
// zero points (offsets) in groups of 128; fp8 e4m3 with 128 x 128 block scales (DeepSeek-V3's
// recipe); fp8-channel e4m3 with one scale per output channel (compressed-tensors' FP8-dynamic
// checkpoints, W8A8 with per-token activation scales); nf4 absmax per
// 64 (groups halved while they do not divide k); dense `dtype` for kDense. `frugal plan
// --precision` counts the same formats (plan/weights.cpp).
ops::WeightFormat dummy_linear_format(DummyPrecision p, DType dtype, int64_t k);

struct DummyWeightOptions {
  DType dtype = DType::kBF16;
  uint64_t seed = 0;
  DummyPrecision precision = DummyPrecision::kDense;
  // The untied lm_head's format (kDense or kInt8: parse_lm_head_precision). A tied model has no
  // lm_head tensor of its own (the embedding table serves), so this changes nothing there.
  DummyPrecision lm_head = DummyPrecision::kDense;
};

// Bytes and formats of the loaded weights per role (the engine's memory report).
struct WeightRoleBytes {
  std::string role;    // "embedding", "attention", "mlp", "lm_head", "router", "norm", "bias", ...
  std::string format;  // ops::weight_format_name ("int4 i4 group_k=128 zero=offset(f32)", "dense bf16")
  int64_t n_tensors = 0;
  int64_t bytes = 0;
};

class WeightStore {
 public:
  // Opens the safetensors of `dir` and checks them against `specs`: every spec present with
  // its shape and a float dtype (bf16/f16/f32), and no unexpected tensor. Errors name the file
  // and the tensor. With a quantization_config in dir/config.json (model/quant/quant_loader.h),
  // each linear stored quantized becomes a quantized Linear (ops/weight_format.h), an untied
  // lm_head stored quantized too (GPTQ's "lm_head": true, compressed-tensors without lm_head in
  // its ignore list: it runs in its format, as vLLM and llama.cpp run theirs); embeddings, norms
  // and biases stay as stored, and a router stored quantized is dequantized to f32 (routers are
  // never run quantized; the loader logs it).
  //
  // `shards` (empty, or one per spec: model/shard.h) cuts each tensor to the slice one
  // tensor-parallel rank holds; specs keep the full shapes the checkpoint is checked against.
  // A quantized linear is cut along its inputs only at scale-group boundaries (else an error
  // naming the tensor); act-order (k_perm) weights are refused when cut along the inputs.
  static Result<std::unique_ptr<WeightStore>> load(const std::string& dir,
                                                   const std::vector<TensorSpec>& specs,
                                                   ops::Backend* backend,
                                                   std::span<const TensorShard> shards = {});
  // Deterministic random weights of realistic scale for every spec.
  // Sharded (`shards` as in load) the values are those of the unsharded tensor's slice.
  static Result<std::unique_ptr<WeightStore>> dummy(const std::vector<TensorSpec>& specs,
                                                    const DummyWeightOptions& opts,
                                                    ops::Backend* backend,
                                                    std::span<const TensorShard> shards = {});
  ~WeightStore();

  // The device view of a tensor listed in the specs; nullptr if absent.
  const TensorView* find(const std::string& name) const;
  // Bytes of weights the engine holds (device or mapped).
  int64_t bytes() const { return bytes_; }
  // The same by role and format, sorted by role.
  const std::vector<WeightRoleBytes>& bytes_by_role() const { return by_role_; }

  Result<Linear> linear(const std::string& weight_name, const std::string& bias_name) const;
  Result<Norm> norm(const std::string& name) const;
  Result<Embedding> embedding(const std::string& name) const;

 private:
  WeightStore() = default;
  using HostTensors = std::vector<std::pair<std::string, TensorView>>;
  Status place(ops::Backend* backend, const HostTensors& host);
  // Adds the parts of quantized weight `name` (codes, scales, offsets, permutation) to `host`.
  Status add_quant(const std::string& name, quant::QuantWeight w, HostTensors& host);
  void count_role(const TensorSpec& s, const std::string& format, int64_t bytes);

  struct QuantLinear {
    ops::WeightFormat format;
    int64_t n = 0, k = 0;
  };
  std::map<std::string, QuantLinear> quant_;                // by the spec's weight name
  // The view of quantized weight `name` (codes, scales, offsets, permutation where placed), or
  // nothing when its codes or scales are not placed.
  std::optional<ops::WeightView> quant_view(const std::string& name, const QuantLinear& ql) const;
  std::vector<std::unique_ptr<quant::QuantWeight>> quant_host_;  // host copies (until uploaded)
  std::vector<std::vector<float>> dequant_host_;            // quantized routers / lm_head made f32
  std::vector<WeightRoleBytes> by_role_;

  std::unique_ptr<SafetensorsSet> files_;  // keeps the mmap alive
  HostBuffer dummy_host_;                  // dummy weights on the host
  std::vector<std::vector<uint8_t>> shard_host_;  // column slices of sharded tensors (host)
  ops::DeviceBuffer arena_;                // uploaded weights (device backends)
  std::map<std::string, TensorView> tensors_;
  int64_t bytes_ = 0;
};

// Fills `out` (n elements of dtype) with values of the given role's realistic distribution;
// value i depends only on (seed, stream, i), so any split of the work gives the same bytes.
void fill_dummy(TensorRole role, DType dtype, uint64_t seed, uint64_t stream, void* out, int64_t n);

}  // namespace frugal::model
