// Device kernel traces: what a GPU ran, kernel by kernel, with device timestamps. A backend that
// can trace implements KernelTracer (the CUDA backend through CUPTI: backend/cuda/kernel_tracer.h);
// `frugal bench offline --kernel-trace` brackets one extra repetition of a point with start() and
// stop() and reads the records (bench/kernel_trace.h says what it makes of them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace frugal {

struct KernelRecord {
  std::string name;           // demangled, with template arguments and without the parameter list
  uint64_t start_ns = 0;      // device timestamps, one clock for every record of a trace
  uint64_t end_ns = 0;
  uint32_t correlation = 0;   // the launch's API call; every kernel of one graph launch shares it
  uint32_t graph_id = 0;      // 0: launched outside a graph
  uint32_t stream = 0;
  int32_t grid[3] = {1, 1, 1};
  int32_t block[3] = {1, 1, 1};
  int32_t registers = 0;      // per thread
  int32_t shared_bytes = 0;   // static + dynamic, per block
};

class KernelTracer {
 public:
  virtual ~KernelTracer() = default;
  // Starts recording every kernel the process launches from now on.
  virtual Status start() = 0;
  // Waits for the device to finish what was launched, stops recording and returns the records,
  // sorted by start. An error when records were lost (the message says how many).
  virtual Result<std::vector<KernelRecord>> stop() = 0;
};

}  // namespace frugal
