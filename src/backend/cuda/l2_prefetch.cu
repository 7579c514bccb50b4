// The L2 prefetch of an ops::CacheHint (launch_l2_prefetch, kernels.h): bytes a later op reads,
// asked of L2 while the ops between run. At V2-Lite's batch 1 the attention part of a layer is a
// chain of latency-bound kernels that leaves DRAM mostly idle for ~33 us (H100), while the MoE
// after it streams 138 MB at the copy rate, 35 MB of it the shared experts' weights, which
// depend on no routing. Asking L2 for those during the attention part moves their DRAM time
// under it, if they stay in L2 until the MoE reads them.
//
// One warp a block. The grid lets the next kernel launch at once (launch_dependents before the
// wait), then waits for the kernel before it to complete, so the prefetch does not share DRAM
// with it, and only then asks for its slice: cp.async.bulk.prefetch.L2 (sm_90; no registers, no
// data back to the SM) in pieces of at most 64 KB (l2_prefetch.cuh). The next kernel's PDL wait
// covers this grid, so the order of the step's kernels is unchanged; the cost to the chain is
// this grid's completion after the one before.
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/l2_prefetch.cuh"

namespace frugal::cuda {
namespace {

__global__ void __launch_bounds__(32) l2_prefetch_kernel(ops::CacheHint h) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  prefetch_hint_slice(h, blockIdx.x, gridDim.x, static_cast<int>(threadIdx.x));
#endif
}

}  // namespace

int64_t cache_hint_bytes(const ops::CacheHint& h) {
  int64_t total = 0;
  for (int r = 0; r < ops::CacheHint::kRanges; ++r)
    if (h.ptr[r] != nullptr && h.bytes[r] > 0) total += h.bytes[r];
  return total;
}

ops::CacheHint cap_cache_hint(const ops::CacheHint& h, int64_t cap) {
  ops::CacheHint out;
  int n = 0;
  for (int r = 0; r < ops::CacheHint::kRanges && cap > 0; ++r) {
    if (h.ptr[r] == nullptr || h.bytes[r] <= 0) continue;
    out.ptr[n] = h.ptr[r];
    out.bytes[n] = h.bytes[r] < cap ? h.bytes[r] : cap;
    cap -= out.bytes[n++];
  }
  return out;
}

cudaError_t launch_l2_prefetch(const ops::CacheHint& h, int grid, cudaStream_t stream) {
  if (cache_hint_bytes(h) == 0 || grid < 1) return cudaSuccess;
  return launch_kernel(l2_prefetch_kernel, dim3(static_cast<unsigned>(grid)), 32, 0, stream, h);
}

}  // namespace frugal::cuda
