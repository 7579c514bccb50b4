// The CUDA backend's KernelTracer (core/kernel_trace.h): CUPTI's activity API records every
// kernel the process runs between start() and stop(), graph replays included, with device
// timestamps. Only one tracer records at a time (CUPTI's activity buffers are per process).
#pragma once

#include <memory>

#include "core/kernel_trace.h"
#include "core/status.h"

namespace frugal::cuda {

// unsupported when this frugal was built without CUPTI (the CUDA toolkit's libcupti).
Result<std::unique_ptr<KernelTracer>> make_kernel_tracer();

}  // namespace frugal::cuda
