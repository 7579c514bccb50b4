#include "backends.h"

#include "backend/cpu/cpu_backend.h"
#include "ops/ref_backend.h"
#ifdef FRUGAL_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace frugal::testing {

Result<std::unique_ptr<ops::Backend>> make_backend_by_name(const std::string& name) {
  if (name == "ref") return ops::make_ref_backend();
  if (name == "cpu") return make_cpu_backend();
#ifdef FRUGAL_WITH_CUDA
  if (name == "cuda") return make_cuda_backend(0);
#endif
  return not_found("backend '" + name + "' is not built in (known: ref, cpu" +
#ifdef FRUGAL_WITH_CUDA
                   std::string(", cuda") +
#else
                   std::string() +
#endif
                   ")");
}

}  // namespace frugal::testing
