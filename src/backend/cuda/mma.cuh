// Device helpers shared by the tensor-core and cp.async kernels (attention_prefill.cu,
// attention_decode.cu, attention_decode_mma.cu, moe_experts.cu): asynchronous global -> shared
// copies, mma.sync m16n8k16 with f32 accumulators, ldmatrix and 16-bit packing.
// Fragment layouts of m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with
// g = lane / 4 and tq = lane % 4:
//   A (16 x 16, row): a0 = (g, 2tq..2tq+1), a1 = (g + 8, 2tq..), a2 = (g, 2tq + 8..), a3 = (g + 8, 2tq + 8..)
//   B (16 x 8, col):  b0 = (k 2tq..2tq+1, n g), b1 = (k 2tq + 8..2tq + 9, n g)
//   C (16 x 8, f32):  c0, c1 = (g, 2tq), (g, 2tq + 1); c2, c3 = (g + 8, 2tq), (g + 8, 2tq + 1)
// In each 32-bit register the lower k (or column) index sits in the low half.
// Included only by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace frugal::cuda {

// BYTES (4, 8 or 16) from gmem to smem, asynchronously; !valid: zero-filled, nothing read.
template <int BYTES>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem, bool valid) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? BYTES : 0;
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem), "r"(src_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(dst), "l"(gmem), "n"(BYTES), "r"(src_bytes));
  }
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) { cp_async<16>(smem, gmem, valid); }
// cp_async<16> that asks L2 to fetch the whole aligned PF-byte block (128 or 256) around gmem
// from DRAM in one request (rows of PF bytes gathered from scattered places).
template <int PF>
__device__ __forceinline__ void cp_async16_l2(void* smem, const void* gmem, bool valid) {
  static_assert(PF == 128 || PF == 256, "L2 prefetch sizes");
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  if constexpr (PF == 256) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0));
  } else {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0));
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

// A ring of NS cp.async stages over n_it iterations. issue(stage, slot) copies one iteration's
// rows into a stage and commits them as one group; slot_at(it) is the table lookup that
// iteration needs (loaded one issue ahead, so it lands under the current iteration's work).
// cp_ring_start issues iterations 0 .. NS - 2 and returns the slot of iteration NS - 1;
// cp_ring_advance, at iteration it, issues iteration it + NS - 1. Past the last iteration both
// commit empty groups, so every iteration waits for the same count (cp_async_wait<NS - 2>
// before the advance, NS - 1 after it).
template <int NS, typename Issue, typename SlotAt>
__device__ __forceinline__ int cp_ring_start(int n_it, Issue&& issue, SlotAt&& slot_at) {
  int slot_next = slot_at(0);
#pragma unroll
  for (int st = 0; st < NS - 1; ++st) {
    if (st < n_it) {
      issue(st, slot_next);
      slot_next = slot_at(st + 1);
    } else {
      cp_async_commit();
    }
  }
  return slot_next;
}

template <int NS, typename Issue, typename SlotAt>
__device__ __forceinline__ void cp_ring_advance(int it, int n_it, int& slot_next, Issue&& issue, SlotAt&& slot_at) {
  if (it + NS - 1 < n_it) {
    issue((it + NS - 1) % NS, slot_next);
    if (it + NS < n_it) slot_next = slot_at(it + NS);
  } else {
    cp_async_commit();  // an empty group keeps the count uniform
  }
}

// c += a * b. Not volatile: the "+f" operands carry every dependency, so the compiler may
// interleave independent mmas (a dependent chain of mma.sync stalls the warp ~30 cycles a step).
__device__ __forceinline__ void mma_bf16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_f16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, const void* smem_row) {
  uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* smem_row) {
  uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// 2^x on the SFU alone (ex2.approx.ftz: about 2 ulp; subnormal results flush to zero, 2^-inf = 0):
// the softmax's exponent without exp2f's extra range handling.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Two floats as one register of two bf16 (or f16), lo in the low half; round to nearest even.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

}  // namespace frugal::cuda
