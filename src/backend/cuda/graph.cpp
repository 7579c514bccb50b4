#include "backend/cuda/graph.h"

#include <string>
#include <utility>

namespace frugal::cuda {
namespace {

Status graph_error(cudaError_t e, const char* what) {
  return internal_error(std::string("cuda graph ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace

CudaGraph::CudaGraph(CudaGraph&& o) noexcept
    : graph_(std::exchange(o.graph_, nullptr)), exec_(std::exchange(o.exec_, nullptr)) {}

CudaGraph& CudaGraph::operator=(CudaGraph&& o) noexcept {
  if (this != &o) {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    graph_ = std::exchange(o.graph_, nullptr);
    exec_ = std::exchange(o.exec_, nullptr);
  }
  return *this;
}

CudaGraph::~CudaGraph() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
}

Result<CudaGraph> CudaGraph::capture(CudaBackend* backend, const std::function<Status()>& record) {
  cudaStream_t stream = backend->stream();
  // Thread-local mode: other threads' unrelated CUDA calls do not invalidate the capture.
  cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return graph_error(e, "begin capture");
  backend->set_capturing(true);
  Status recorded = record();
  backend->set_capturing(false);
  CudaGraph g;
  e = cudaStreamEndCapture(stream, &g.graph_);
  if (!recorded.is_ok()) return recorded.with_context("capturing a cuda graph");
  if (e != cudaSuccess) return graph_error(e, "end capture");
  e = cudaGraphInstantiate(&g.exec_, g.graph_, 0);
  if (e != cudaSuccess) return graph_error(e, "instantiate");
  return g;
}

Status CudaGraph::replay(cudaStream_t stream) const {
  if (!exec_) return internal_error("cuda graph replay before capture");
  cudaError_t e = cudaGraphLaunch(exec_, stream);
  return e == cudaSuccess ? Status::ok() : graph_error(e, "launch");
}

Status GraphCache::ensure(uint64_t bucket, const std::function<Status()>& record) {
  if (has(bucket)) return Status::ok();
  FRUGAL_ASSIGN_OR_RETURN(CudaGraph g, CudaGraph::capture(backend_, record));
  graphs_.emplace(bucket, std::move(g));
  return Status::ok();
}

Status GraphCache::replay(uint64_t bucket) const {
  auto it = graphs_.find(bucket);
  if (it == graphs_.end()) return not_found("no cuda graph captured for batch bucket " + std::to_string(bucket));
  return it->second.replay(backend_->stream());
}

}  // namespace frugal::cuda
