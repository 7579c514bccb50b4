// The quantized GEMV's memory access pattern alone, with no arithmetic (cuda_kernel_bench
// --quant, the "qload" rows): does the layout of the codes, or the work done on them, keep the
// lean GEMV at ~60-67% of the copy ceiling (docs/perf/2026-12-05-session43.md)?
//  - tiles: the lean GEMV's order. A block owns a 16-row tile, its W warps take the quads of k in
//    turn, and lane (g, q) loads chunk q of rows g and g + 8: each 16-byte load instruction of a
//    warp touches 8 rows, 64 bytes of each.
//  - linear: the same bytes of the same tile (its 16 rows lie one after the other in memory), each
//    warp reading 1 KB pieces with 512 contiguous bytes a load instruction, the order a tile-major
//    re-layout of the codes would give the GEMV.
// Both load one quad ahead (the lean GEMV's double buffer) with its streaming load; the words are
// XOR-ed and one word a warp is written, so nothing is optimized away.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/common.cuh"

namespace frugal::cuda::bench {
namespace {

template <int W, bool kLinear>
__global__ void __launch_bounds__(W * 32) load_pattern_kernel(const uint8_t* codes, int64_t row_bytes, uint32_t* out) {
  extern __shared__ uint8_t occupancy_cap[];  // sized by the launch to cap blocks an SM; unused
  (void)occupancy_cap;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const uint8_t* tile = codes + static_cast<int64_t>(blockIdx.x) * 16 * row_bytes;
  const int n_quads = static_cast<int>(row_bytes / 64);  // a quad: 64 bytes of each of the 16 rows
  auto load = [&](int quad, uint4& a, uint4& b) {
    if constexpr (kLinear) {
      const uint8_t* p = tile + static_cast<int64_t>(quad) * 1024 + lane * 16;
      a = load_stream16(p);
      b = load_stream16(p + 512);
    } else {
      const uint8_t* p = tile + g * row_bytes + quad * 64 + q * 16;
      a = load_stream16(p);
      b = load_stream16(p + 8 * row_bytes);
    }
  };
  uint32_t acc = 0;
  uint4 ca{}, cb{}, na{}, nb{};
  if (warp < n_quads) load(warp, ca, cb);
  for (int quad = warp; quad < n_quads; quad += W) {
    if (quad + W < n_quads) load(quad + W, na, nb);
    acc ^= ca.x ^ ca.y ^ ca.z ^ ca.w ^ cb.x ^ cb.y ^ cb.z ^ cb.w;
    ca = na;
    cb = nb;
  }
  for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) out[static_cast<int64_t>(blockIdx.x) * W + warp] = acc;
}

template <int W, bool kLinear>
cudaError_t launch_w(const void* codes, int64_t n, int64_t row_bytes, int blocks_per_sm, uint32_t* out, cudaStream_t s) {
  size_t smem = 0;
  if (blocks_per_sm > 0) {
    int dev = 0, per_sm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) != cudaSuccess)
      return cudaErrorInvalidValue;
    // Each block reserves 1 KB for the runtime besides its own request.
    smem = static_cast<size_t>(per_sm / blocks_per_sm) - 1024;
    const cudaError_t e = cudaFuncSetAttribute(load_pattern_kernel<W, kLinear>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  load_pattern_kernel<W, kLinear><<<static_cast<unsigned>(n / 16), W * 32, smem, s>>>(
      static_cast<const uint8_t*>(codes), row_bytes, out);
  return cudaGetLastError();
}

}  // namespace

// Declared in cuda_bench.h (not included: its host headers are C++20, this file's device code C++17).
cudaError_t launch_load_pattern(const void* codes, int64_t n, int64_t row_bytes, int warps, bool linear,
                                int blocks_per_sm, uint32_t* out, cudaStream_t s) {
  if (n % 16 != 0 || row_bytes % 64 != 0 || (warps != 4 && warps != 8)) return cudaErrorInvalidValue;
  if (warps == 4)
    return linear ? launch_w<4, true>(codes, n, row_bytes, blocks_per_sm, out, s)
                  : launch_w<4, false>(codes, n, row_bytes, blocks_per_sm, out, s);
  return linear ? launch_w<8, true>(codes, n, row_bytes, blocks_per_sm, out, s)
                : launch_w<8, false>(codes, n, row_bytes, blocks_per_sm, out, s);
}

}  // namespace frugal::cuda::bench
