// Hopper warpgroup MMA (wgmma.mma_async, sm_90a only) for kernels whose B operand sits in shared
// memory in the 128-byte-swizzled layout and whose A operand comes from registers or (the _ss
// form) from shared memory in the same layout.
//
// The shared tile layout used here (for a bf16 operand whose rows are 128 bytes = 64 values):
// row r's 16-byte chunk c is stored at r * 128 + ((c ^ (r % 8)) * 16) inside a 1024-byte
// aligned tile (the hardware applies the XOR on address bits [4, 7) from bits [7, 10), so the
// tile base must be 1024-aligned and the descriptor's base offset stays 0). Wider rows are cut
// into 64-value column blocks stored one after the other (sw128_offset below).
//
//   - As a K-major B (B[k][n] = tile[n][k]: rows are n, k contiguous; transpose flag 0): the
//     descriptor of the k16 step at k0 starts at the column block of k0 plus (k0 % 64) * 2
//     bytes; its stride byte offset (SBO) is 1024, the distance between groups of 8 rows.
//   - As an MN-major B (B[k][n] = tile[k][n]: rows are k, n contiguous; transpose flag 1): a
//     64-wide n slice of the k16 step at k0 starts at row k0 of its column block; SBO is again
//     1024, now between groups of 8 k rows. The leading byte offset (LBO) is the stride between
//     64-wide n blocks: unused at n = 64 (set to 1024), the column block size (rows * 128) when
//     one wgmma spans n = 128.
//   - As a K-major A (A[m][k] = tile[m][k], the shared-memory A of the _ss form): as a K-major
//     B with rows m; a 64-row slice that starts at row 8i starts 8i * 128 bytes in.
//
// Register layouts (PTX ISA, "Register Fragments" of wgmma .m64nNk16): warp w of the warpgroup
// owns rows 16w .. 16w + 15; per warp they are exactly mma.sync m16n8k16's (mma.cuh): A is the
// four registers a0..a3 of a 16 x 16 fragment, and D holds, for each 8-column block j, d[4j + e]
// = (row g + 8 (e >> 1), column 8j + 2 tq + (e & 1)), g = lane / 4, tq = lane % 4.
//
// Ordering: shared-memory writes by threads (st.shared, cp.async) become visible to wgmma only
// after fence_proxy_async() by the writer and a barrier; registers an mma reads or accumulates
// must be fenced by wgmma_fence() after the thread last wrote them; accumulators may be read
// only after wgmma_wait<0>() (or a wait that retires their group). The compiler does not know
// the last two rules (to it an mma's outputs exist when its asm statement ends), so
// pin_regs() brackets them: an empty volatile asm that "rewrites" the registers, placed before
// wgmma_fence() and after the wait, keeps ordinary instructions on those registers on the
// right side of both.
#pragma once

#include <cstdint>

namespace frugal::cuda {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FRUGAL_WGMMA 1
#else
#define FRUGAL_WGMMA 0
#endif

// Byte offset of (row, 16-byte chunk) in a swizzled tile of `rows` rows whose rows hold
// `chunks` 16-byte chunks (a multiple of 8): 64-value column blocks of rows x 128 bytes.
__host__ __device__ constexpr uint32_t sw128_offset(int row, int chunk, int rows) {
  return static_cast<uint32_t>((chunk >> 3) * rows * 128 + row * 128 + (((chunk & 7) ^ (row & 7)) << 4));
}

// lbo: the leading byte offset, which only an MN-major operand wider than 64 uses.
__device__ __forceinline__ uint64_t wgmma_desc_sw128(const void* smem, uint32_t lbo = 1024) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  constexpr uint64_t kStride = 1024 >> 4;
  return static_cast<uint64_t>((addr >> 4) & 0x3fffu) | (static_cast<uint64_t>(lbo >> 4) << 16) | (kStride << 32) |
         (uint64_t{1} << 62);
}

__device__ __forceinline__ void fence_proxy_async() {
#if FRUGAL_WGMMA
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_fence() {
#if FRUGAL_WGMMA
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#if FRUGAL_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if FRUGAL_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}

template <int N>
__device__ __forceinline__ void pin_regs(float (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(r[i][0]), "+f"(r[i][1]), "+f"(r[i][2]), "+f"(r[i][3])::"memory");
}
template <int N>
__device__ __forceinline__ void pin_regs(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i][0]), "+r"(r[i][1]), "+r"(r[i][2]), "+r"(r[i][3])::"memory");
}

// One synchronous group: issue() launches wgmmas that read the registers `a` and accumulate
// into `acc`; the fences and pins of the ordering rules above wrap it, and it returns with the
// group complete (acc readable, the shared operands free).
template <int NA, int NC, typename Issue>
__device__ __forceinline__ void wgmma_sync_group(uint32_t (&a)[NA][4], float (&acc)[NC][4], Issue&& issue) {
  pin_regs(a);
  pin_regs(acc);
  wgmma_fence();
  issue();
  wgmma_commit();
  wgmma_wait<0>();
  pin_regs(acc);
}

// d[64 x 64] (+)= a[64 x 16] * B[16 x 64], bf16 in, f32 accumulate; a from registers (this
// warp's four A registers), B by descriptor. accumulate = false overwrites d. kTransB: B is
// MN-major (see above).
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16_bf16(float (&d)[8][4], const uint32_t* a, uint64_t desc_b,
                                                     bool accumulate) {
#if FRUGAL_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %38, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, %37;\n"
      "}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(kTransB), "r"(static_cast<int>(accumulate)));
#else
  (void)d, (void)a, (void)desc_b, (void)accumulate;
  __trap();
#endif
}

// d[64 x N] (+)= a[64 x 16] * B[16 x N] for N = 16 / 32 / 48 (d[N / 8][4]): a from registers as in
// wgmma_m64n64k16_bf16, B by descriptor (K-major).
__device__ __forceinline__ void wgmma_m64n16k16_bf16(float (&d)[2][4], const uint32_t* a, uint64_t desc_b, bool accumulate) {
#if FRUGAL_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, "
      "{%8, %9, %10, %11}, %12, p, 1, 1, 0;\n"
      "}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(accumulate)));
#else
  (void)d, (void)a, (void)desc_b, (void)accumulate;
  __trap();
#endif
}
__device__ __forceinline__ void wgmma_m64n32k16_bf16(float (&d)[4][4], const uint32_t* a, uint64_t desc_b, bool accumulate) {
#if FRUGAL_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
      "%14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n"
      "}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(accumulate)));
#else
  (void)d, (void)a, (void)desc_b, (void)accumulate;
  __trap();
#endif
}

__device__ __forceinline__ void wgmma_m64n48k16_bf16(float (&d)[6][4], const uint32_t* a, uint64_t desc_b, bool accumulate) {
#if FRUGAL_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %29, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
      "%14, %15, %16, %17, %18, %19, %20, %21, %22, %23}, {%24, %25, %26, %27}, %28, p, 1, 1, 0;\n"
      "}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(accumulate)));
#else
  (void)d, (void)a, (void)desc_b, (void)accumulate;
  __trap();
#endif
}

// The 64 f32 accumulators of an m64n128 wgmma (d[16][4]) as the asm's first operands %0..%63,
// shared by the n = 128 wrappers below.
#define FRUGAL_WGMMA_N128_D                                                                   \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                      \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "            \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "            \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define FRUGAL_WGMMA_D4(d, j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define FRUGAL_WGMMA_N128_D_OPERANDS(d)                                                      \
  FRUGAL_WGMMA_D4(d, 0), FRUGAL_WGMMA_D4(d, 1), FRUGAL_WGMMA_D4(d, 2), FRUGAL_WGMMA_D4(d, 3),     \
      FRUGAL_WGMMA_D4(d, 4), FRUGAL_WGMMA_D4(d, 5), FRUGAL_WGMMA_D4(d, 6), FRUGAL_WGMMA_D4(d, 7), \
      FRUGAL_WGMMA_D4(d, 8), FRUGAL_WGMMA_D4(d, 9), FRUGAL_WGMMA_D4(d, 10), FRUGAL_WGMMA_D4(d, 11), \
      FRUGAL_WGMMA_D4(d, 12), FRUGAL_WGMMA_D4(d, 13), FRUGAL_WGMMA_D4(d, 14), FRUGAL_WGMMA_D4(d, 15)

// d[64 x 128] (+)= A[64 x 16] * B[16 x 128], bf16 in, f32 accumulate, both operands by
// descriptor (K-major: no transpose); accumulate = false overwrites d. d holds, per 8-column
// block j, d[j][e] as in the layout above.
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
#if FRUGAL_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" FRUGAL_WGMMA_N128_D "}"
      ", %64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : FRUGAL_WGMMA_N128_D_OPERANDS(d)
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
#else
  (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
  __trap();
#endif
}

// d[64 x 128] (+)= a[64 x 16] * B[16 x 128]: a from registers as in wgmma_m64n64k16_bf16, B by
// descriptor (kTransB: MN-major, whose two 64-wide n blocks lie the descriptor's leading byte
// offset apart).
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[16][4], const uint32_t* a, uint64_t desc_b, bool accumulate) {
#if FRUGAL_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %70, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" FRUGAL_WGMMA_N128_D "}"
      ", {%64, %65, %66, %67}, %68, p, 1, 1, %69;\n"
      "}\n"
      : FRUGAL_WGMMA_N128_D_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(kTransB), "r"(static_cast<int>(accumulate)));
#else
  (void)d, (void)a, (void)desc_b, (void)accumulate;
  __trap();
#endif
}

}  // namespace frugal::cuda
