// CUDA graphs for decode steps: capture the ops of one step on the backend's stream once per
// batch-size bucket, then replay. Graphs bake in every kernel argument, so a captured step must
// read everything that changes between steps (token ids, positions, slot mapping, block
// tables, context lengths, sampling parameters) from device buffers the engine rewrites before
// each replay, and must size every shape-dependent choice for the bucket's worst case (for
// attention: max_ctx_len = the longest context the graph will ever see).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>

#include "backend/cuda/cuda_backend.h"
#include "core/status.h"

namespace frugal::cuda {

class CudaGraph {
 public:
  CudaGraph() = default;
  CudaGraph(CudaGraph&& o) noexcept;
  CudaGraph& operator=(CudaGraph&& o) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph();

  // Runs `record` with the backend's stream in capture mode and instantiates the result.
  // `record` must only enqueue work (no allocation, no synchronization, no host copies).
  static Result<CudaGraph> capture(CudaBackend* backend, const std::function<Status()>& record);
  Status replay(cudaStream_t stream) const;
  bool valid() const { return exec_ != nullptr; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// Graphs keyed by batch-size bucket (the padded batch size a step runs at).
class GraphCache {
 public:
  explicit GraphCache(CudaBackend* backend) : backend_(backend) {}
  bool has(uint64_t bucket) const { return graphs_.count(bucket) != 0; }
  // Captures the bucket's graph if missing; `record` enqueues one step at that batch size.
  Status ensure(uint64_t bucket, const std::function<Status()>& record);
  Status replay(uint64_t bucket) const;
  void clear() { graphs_.clear(); }
  size_t size() const { return graphs_.size(); }

 private:
  CudaBackend* backend_;
  std::map<uint64_t, CudaGraph> graphs_;
};

}  // namespace frugal::cuda
