// An ops::CacheHint's ranges asked of L2 by one warp of each block of a grid (l2_prefetch.cu's
// grid, the persistent MLA kernel). Included only by .cu files.
#pragma once

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "ops/params.h"

namespace frugal::cuda {

// Block b of a grid of G asks L2 for its slice of each range of h: the range's whole 16-byte
// units (the bulk prefetch's alignment) cut into G slices, each lane of the calling warp asking
// for pieces of at most 64 KB (cp.async.bulk.prefetch.L2, sm_90; nothing before). Unused ranges
// (null, or 0 bytes) are skipped.
__device__ __forceinline__ void prefetch_hint_slice(const ops::CacheHint& h, int64_t b, int64_t G, int lane) {
  constexpr int64_t kPiece = 64 << 10;
  for (int r = 0; r < ops::CacheHint::kRanges; ++r) {
    if (h.ptr[r] == nullptr || h.bytes[r] <= 0) continue;
    const uintptr_t p = reinterpret_cast<uintptr_t>(h.ptr[r]);
    const uintptr_t begin = (p + 15) & ~uintptr_t{15}, end = (p + static_cast<uintptr_t>(h.bytes[r])) & ~uintptr_t{15};
    if (end <= begin) continue;
    const int64_t total = static_cast<int64_t>(end - begin);
    const int64_t per = (total / 16 + G - 1) / G * 16;  // whole 16-byte units a block
    const int64_t s0 = b * per, s1 = min(total, s0 + per);
    for (int64_t off = s0 + lane * kPiece; off < s1; off += 32 * kPiece)
      prefetch_l2(reinterpret_cast<const void*>(begin + off), static_cast<uint32_t>(min(kPiece, s1 - off)));
  }
}

}  // namespace frugal::cuda
