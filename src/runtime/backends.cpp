#include "runtime/backends.h"

#include "backend/cpu/cpu_backend.h"
#include "ops/ref_backend.h"
#ifdef FRUGAL_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace frugal::runtime {

Result<BackendHandle> make_backend(const std::string& device, int threads) {
  BackendHandle h;
  if (device == "cpu") {
    ThreadPool* pool = &ThreadPool::global();
    if (threads > 0) {
      h.pool = std::make_unique<ThreadPool>(threads);
      pool = h.pool.get();
    }
    h.backend = make_cpu_backend(pool);
    return h;
  }
  if (device == "ref") {
    h.backend = ops::make_ref_backend();
    return h;
  }
  if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
#ifdef FRUGAL_WITH_CUDA
    int index = 0;
    if (device.size() > 5) {
      try {
        index = std::stoi(device.substr(5));
      } catch (...) {
        return invalid_argument("--device: expected cuda:N, got '" + device + "'");
      }
    }
    FRUGAL_ASSIGN_OR_RETURN(h.backend, cuda::make_cuda_backend(index));
    return h;
#else
    return unsupported("--device " + device + ": this frugal was built without CUDA (configure with -DFRUGAL_CUDA=ON)");
#endif
  }
  return invalid_argument("--device: unknown device '" + device + "' (expected cpu, cuda, cuda:N or ref)");
}

Result<void*> backend_stream(ops::Backend& backend) {
#ifdef FRUGAL_WITH_CUDA
  if (auto* c = dynamic_cast<cuda::CudaBackend*>(&backend)) return static_cast<void*>(c->stream());
#endif
  return unsupported("backend " + backend.name() + " has no CUDA stream (NCCL ranks need the CUDA backend)");
}

}  // namespace frugal::runtime
