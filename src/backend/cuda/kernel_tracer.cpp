#include "backend/cuda/kernel_tracer.h"

#ifdef FRUGAL_HAVE_CUPTI

#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

namespace frugal::cuda {
namespace {

std::string cupti_error(const char* what, CUptiResult r) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || s == nullptr) s = "unknown CUPTI error";
  return fmt::format("kernel trace: {}: {} ({})", what, s, static_cast<int>(r));
}

// CUPTI's buffer callbacks are process-wide C functions, so the records they deliver land here.
struct TraceState {
  std::mutex mu;
  bool registered = false, active = false;
  std::vector<KernelRecord> records;
  size_t dropped = 0;
  std::unordered_map<const char*, std::string> names;  // CUPTI keeps one name string per kernel

  const std::string& demangled(const char* mangled) {
    auto it = names.find(mangled);
    if (it != names.end()) return it->second;
    int status = 0;
    char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    std::string s = status == 0 && d ? d : mangled ? mangled : "(unnamed)";
    std::free(d);
    return names.emplace(mangled, std::move(s)).first->second;
  }
};

TraceState& state() {
  static TraceState s;
  return s;
}

constexpr size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t /*size*/, size_t valid) {
  TraceState& st = state();
  {
    std::lock_guard<std::mutex> lk(st.mu);
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      KernelRecord r;
      r.name = st.demangled(k->name);
      r.start_ns = k->start;
      r.end_ns = k->end;
      r.correlation = k->correlationId;
      r.graph_id = k->graphId;
      r.stream = k->streamId;
      r.grid[0] = k->gridX, r.grid[1] = k->gridY, r.grid[2] = k->gridZ;
      r.block[0] = k->blockX, r.block[1] = k->blockY, r.block[2] = k->blockZ;
      r.registers = k->registersPerThread;
      r.shared_bytes = k->staticSharedMemory + k->dynamicSharedMemory;
      st.records.push_back(std::move(r));
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS) st.dropped += dropped;
  }
  std::free(buffer);
}

class CuptiKernelTracer final : public KernelTracer {
 public:
  Status start() override {
    TraceState& st = state();
    {
      std::lock_guard<std::mutex> lk(st.mu);
      if (st.active) return invalid_argument("kernel trace: a trace is already recording");
      st.records.clear();
      st.dropped = 0;
    }
    if (!st.registered) {
      const CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
      if (r != CUPTI_SUCCESS) return internal_error(cupti_error("registering the activity buffers", r));
      st.registered = true;
    }
    // CONCURRENT_KERNEL: kernels keep running concurrently while traced (KERNEL would serialize them).
    const CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) return internal_error(cupti_error("enabling kernel activity", r));
    std::lock_guard<std::mutex> lk(st.mu);
    st.active = true;
    return Status::ok();
  }

  Result<std::vector<KernelRecord>> stop() override {
    TraceState& st = state();
    {
      std::lock_guard<std::mutex> lk(st.mu);
      if (!st.active) return invalid_argument("kernel trace: stop() without start()");
    }
    // The caller has waited for its work (the benchmark's requests finished); a forced flush
    // hands over every completed record, including those of a partly filled buffer.
    CUptiResult r = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    const CUptiResult f = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard<std::mutex> lk(st.mu);
    st.active = false;
    if (r != CUPTI_SUCCESS) return internal_error(cupti_error("disabling kernel activity", r));
    if (f != CUPTI_SUCCESS) return internal_error(cupti_error("flushing the activity buffers", f));
    if (st.dropped > 0) {
      return resource_exhausted(fmt::format("kernel trace: CUPTI dropped {} kernel records (its buffers were full); "
                                            "trace fewer steps", st.dropped));
    }
    std::vector<KernelRecord> out = std::move(st.records);
    st.records.clear();
    std::stable_sort(out.begin(), out.end(), [](const KernelRecord& a, const KernelRecord& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns < b.end_ns;
    });
    return out;
  }

  ~CuptiKernelTracer() override {
    TraceState& st = state();
    bool active = false;
    {
      std::lock_guard<std::mutex> lk(st.mu);
      active = st.active;
    }
    if (active) (void)stop();
  }
};

}  // namespace

Result<std::unique_ptr<KernelTracer>> make_kernel_tracer() {
  return std::unique_ptr<KernelTracer>(std::make_unique<CuptiKernelTracer>());
}

}  // namespace frugal::cuda

#else  // !FRUGAL_HAVE_CUPTI

namespace frugal::cuda {

Result<std::unique_ptr<KernelTracer>> make_kernel_tracer() {
  return unsupported("kernel trace: this frugal was built without CUPTI (the CUDA toolkit's libcupti was not found)");
}

}  // namespace frugal::cuda

#endif
