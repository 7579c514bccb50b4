#include "backend/cpu/quant_matmul.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/cpu_features.h"

namespace frugal::cpu {
namespace {

bool has_avx512() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f && f.avx512bw && f.avx512vl && f.fma && f.f16c;
}
bool has_avx2() {
  const CpuFeatures& f = cpu_features();
  return f.avx2 && f.fma && f.f16c;
}

// The dense table of the same ISA, for the GEMM path on dequantized blocks.
const KernelTable& dense_for(const QuantKernelTable& q) {
  if (std::strcmp(q.isa, "avx512") == 0) return avx512_kernels();
  if (std::strcmp(q.isa, "avx2") == 0) return avx2_kernels();
  return scalar_kernels();
}

constexpr int64_t kGemmRows = 64;               // weight rows dequantized per GEMM step
constexpr int64_t kMinWorkPerThread = 32 * 1024;

std::vector<float>& thread_scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf;
}

}  // namespace

const QuantKernelTable& best_quant_kernels() {
  if (has_avx512()) return avx512_quant_kernels();
  if (has_avx2()) return avx2_quant_kernels();
  return scalar_quant_kernels();
}

Result<const QuantKernelTable*> quant_kernels_for(const char* isa) {
  const std::string s = isa ? isa : "";
  if (s == "scalar") return &scalar_quant_kernels();
  if (s == "avx2") {
    if (!has_avx2()) return unsupported("quant kernels: this CPU has no avx2+fma+f16c");
    return &avx2_quant_kernels();
  }
  if (s == "avx512") {
    if (!has_avx512()) return unsupported("quant kernels: this CPU has no avx512f/bw/vl");
    return &avx512_quant_kernels();
  }
  return invalid_argument("quant kernels: unknown isa '" + s + "' (avx512, avx2 or scalar)");
}

Status quant_matmul(ThreadPool& pool, const QuantMatmulRequest& r) {
  return quant_matmul(pool, r, best_quant_kernels());
}

Status quant_matmul(ThreadPool& pool, const QuantMatmulRequest& r, const QuantKernelTable& kt) {
  if (r.w == nullptr) return invalid_argument("quant_matmul: w is null");
  const quant::QuantWeight& w = *r.w;
  const std::string who = "quant_matmul(" + w.name + "): ";
  if (r.m < 0) return invalid_argument(who + "m = " + std::to_string(r.m) + " is negative");
  if (r.m == 0 || w.n == 0) return Status::ok();
  if (r.x == nullptr || r.y == nullptr) return invalid_argument(who + "x or y is null");
  if (r.ld_x < w.k) return invalid_argument(who + "ld_x " + std::to_string(r.ld_x) + " < k " + std::to_string(w.k));
  if (r.ld_y < w.n) return invalid_argument(who + "ld_y " + std::to_string(r.ld_y) + " < n " + std::to_string(w.n));
  if (static_cast<int64_t>(w.q.size()) != w.n * w.ld_q())
    return invalid_argument(who + "codes hold " + std::to_string(w.q.size()) + " bytes, expected " +
                            std::to_string(w.n * w.ld_q()));

  // x in the weight's internal input order, zero-padded to k_pad; per-group sums for offsets.
  const int64_t kp = w.k_pad, ng = w.n_groups;
  std::vector<float> xp(static_cast<size_t>(r.m * kp), 0.0f);
  for (int64_t i = 0; i < r.m; ++i) {
    const float* src = r.x + i * r.ld_x;
    float* dst = xp.data() + i * kp;
    if (w.k_perm.empty()) {
      std::memcpy(dst, src, static_cast<size_t>(w.k) * sizeof(float));
    } else {
      for (int64_t j = 0; j < w.k; ++j) dst[j] = src[w.k_perm[static_cast<size_t>(j)]];
    }
  }
  std::vector<float> xsum;
  if (!w.offset.empty()) {
    xsum.assign(static_cast<size_t>(r.m * ng), 0.0f);
    for (int64_t i = 0; i < r.m; ++i)
      for (int64_t j = 0; j < w.k; ++j) xsum[static_cast<size_t>(i * ng + j / w.group)] += xp[static_cast<size_t>(i * kp + j)];
  }
  QuantMatmulArgs a{.x = xp.data(), .ld_x = kp, .xsum = xsum.empty() ? nullptr : xsum.data(),
                    .bias = r.bias, .y = r.y, .ld_y = r.ld_y, .m = r.m,
                    .accumulate = r.accumulate, .w = w.view()};

  if (r.m <= kGemvMaxTokens) {
    const int64_t grain = std::max<int64_t>(16, kMinWorkPerThread / std::max<int64_t>(1, kp * r.m));
    pool.parallel_for(w.n, grain, [&](int64_t n0, int64_t n1) { kt.gemv(a, n0, n1); });
    return Status::ok();
  }
  // GEMM: dequantize kGemmRows rows to f32, then the dense kernel of the same ISA on them.
  const KernelTable& dense = dense_for(kt);
  const int64_t n_blocks = (w.n + kGemmRows - 1) / kGemmRows;
  pool.parallel_for(n_blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float>& buf = thread_scratch(static_cast<size_t>(kGemmRows * kp + kGemmPackFloats));
    float* wf = buf.data();
    float* pack = buf.data() + kGemmRows * kp;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * kGemmRows, rows = std::min(kGemmRows, w.n - r0);
      kt.dequant_rows(a.w, r0, r0 + rows, wf);
      ops::MatmulParams p{.x = xp.data(), .x_dtype = DType::kF32, .ld_x = kp, .w = wf,
                          .w_dtype = DType::kF32, .bias = r.bias ? r.bias + r0 : nullptr,
                          .bias_dtype = DType::kF32, .y = r.y + r0, .y_dtype = DType::kF32,
                          .ld_y = r.ld_y, .m = r.m, .n = rows, .k = kp,
                          .accumulate = r.accumulate};
      if (dense.gemm)
        dense.gemm(p, 0, rows, pack);
      else
        dense.gemv(p, 0, rows);
    }
  });
  return Status::ok();
}

}  // namespace frugal::cpu
