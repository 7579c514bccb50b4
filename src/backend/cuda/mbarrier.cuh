// mbarrier, named-barrier and bulk-copy helpers for the producer / consumer kernels of sm_90
// (attention_prefill_fa3.cu, quant_gemv_bulk.cu). Device code only for sm_90 and later (the
// host pass parses it; earlier device passes see nothing, so their kernels must not use it).
// Every wait counts its polls and traps past kMaxPolls, so a protocol bug fails the launch
// instead of hanging the GPU. Included only by .cu files.
#pragma once

#include <cstdint>

namespace frugal::cuda {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// A wait of 2^25 polls, each suspended at most kSuspendNs, is far past any real wait (the
// longest is a whole tile's gather or GEMMs, microseconds).
constexpr uint32_t kMaxPolls = 1u << 25, kSuspendNs = 1000;

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(bar) : "memory");
}

// Arrives on `bar` and adds `bytes` to the transaction count its phase waits for (the bulk
// copies that name the barrier complete them).
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// Arrives on `bar` once all of this thread's earlier cp.async copies have landed; .noinc: the
// arrival counts against the barrier's expected count (one per producer thread).
__device__ __forceinline__ void mbar_arrive_cp_async(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}"
      : "=r"(done)
      : "r"(bar), "r"(parity), "r"(kSuspendNs)
      : "memory");
  return done != 0;
}

// Out of line: a trap inlined into the consumers' code makes ptxas allocate it as if
// setmaxnreg had not raised their registers (spills, and wgmma serialized: C7512).
static __device__ __noinline__ void trap_stuck_wait() { __trap(); }

// Waits for the completion of the barrier's phase of this parity (acquire: the writes released
// by its arrivals are visible after it).
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  if (mbar_try_wait(bar, parity)) return;
  uint32_t polls = 0;
  while (!mbar_try_wait(bar, parity))
    if (++polls == kMaxPolls) trap_stuck_wait();
}

__device__ __forceinline__ void named_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void named_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }

// An L2 policy that evicts these lines first: for weights streamed once a step, so they do not
// push out the activations, scales and KV that later kernels re-read.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

// One bulk copy (the TMA engine, no registers or per-thread work) of `bytes` (a multiple of
// 16; both addresses 16-byte aligned) from global memory into this CTA's shared memory at
// `dst`; its completion counts `bytes` against `bar`'s transaction count.
__device__ __forceinline__ void bulk_copy_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(policy)
      : "memory");
}
#endif

}  // namespace frugal::cuda
