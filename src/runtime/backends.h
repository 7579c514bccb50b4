// Backend selection by device name ("cpu", "ref", "cuda", "cuda:N"), owning what the backend
// needs (a CPU thread pool).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "core/thread_pool.h"
#include "ops/backend.h"

namespace frugal::runtime {

struct BackendHandle {
  std::unique_ptr<ThreadPool> pool;  // CPU only, when a thread count was given
  std::unique_ptr<ops::Backend> backend;
};

// threads <= 0: the process-wide pool (FRUGAL_THREADS or all hardware threads).
Result<BackendHandle> make_backend(const std::string& device, int threads);

// The CUDA stream (a cudaStream_t) a CUDA backend runs its ops on, for NCCL to enqueue on;
// an error for other backends.
Result<void*> backend_stream(ops::Backend& backend);

}  // namespace frugal::runtime
