#include "backend/cpu/quant_matmul.h"

#include <algorithm>
#include <cmath>
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
  if (std::strncmp(q.isa, "avx512", 6) == 0) return avx512_kernels();
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

// Prefill on int8 activations (QuantKernelTable::gemm_i8): x rows quantized per 32-block in
// parallel (rows padded with zeros to a whole register tile), then weight panels over threads.
Status gemm_int8_activations(ThreadPool& pool, const QuantMatmulRequest& r, const quant::QuantWeightView& w,
                             const QuantKernelTable& kt, const std::vector<float>& xp) {
  const int64_t kp = w.k_pad, ng = w.n_groups, nb = kp / quant::kBlock;
  const int64_t mr = kt.gemm_i8_mr, m_pad = (r.m + mr - 1) / mr * mr;
  std::vector<int8_t> xq(static_cast<size_t>(m_pad * kp), 0);
  std::vector<float> xd(static_cast<size_t>(m_pad * nb), 0.0f);
  std::vector<int32_t> xc(static_cast<size_t>(m_pad * nb), 0);
  // Offsets multiply the sums of the rounded x per group (d * sum(xq) per block; xc holds
  // -128 * sum(xq)): the error is then sum_j W_j * dx_j, the dequantized weight's.
  std::vector<float> xsum(w.offset != nullptr ? static_cast<size_t>(m_pad * ng) : 0, 0.0f);
  const int64_t bpg = std::max<int64_t>(1, std::min(w.group, kp) / quant::kBlock);
  pool.parallel_for(r.m, std::max<int64_t>(1, kMinWorkPerThread / kp), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      kt.quantize_x(xp.data() + i * kp, kp, xq.data() + i * kp, xd.data() + i * nb, xc.data() + i * nb);
      if (!xsum.empty())
        for (int64_t b = 0; b < nb; ++b)
          xsum[static_cast<size_t>(i * ng + std::min(b / bpg, ng - 1))] +=
              xd[static_cast<size_t>(i * nb + b)] * static_cast<float>(xc[static_cast<size_t>(i * nb + b)] / -128);
    }
  });
  QuantMatmulArgs a{.x = xp.data(), .ld_x = kp, .xsum = xsum.empty() ? nullptr : xsum.data(),
                    .bias = r.bias, .y = r.y, .ld_y = r.ld_y, .m = r.m,
                    .accumulate = r.accumulate, .w = w, .xq = xq.data(), .ld_xq = kp,
                    .xd16 = nullptr, .ld_xd16 = 0, .xd = xd.data(), .xc = xc.data(), .ld_xd = nb};
  const int64_t panel = kt.gemm_i8_panel, n_panels = (w.n + panel - 1) / panel;
  const size_t scratch = static_cast<size_t>(gemm_i8_scratch_bytes(panel, kp, ng));
  pool.parallel_for(n_panels, 1, [&](int64_t p0, int64_t p1) {
    thread_local std::vector<uint8_t> buf;
    if (buf.size() < scratch) buf.resize(scratch);
    kt.gemm_i8(a, p0, p1, buf.data());
  });
  return Status::ok();
}

}  // namespace

const QuantKernelTable& best_quant_kernels() {
  if (has_avx512() && cpu_features().avx512_vnni) return avx512_vnni_quant_kernels();
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
  if (s == "avx512_vnni") {
    if (!has_avx512() || !cpu_features().avx512_vnni)
      return unsupported("quant kernels: this CPU has no avx512 vnni");
    return &avx512_vnni_quant_kernels();
  }
  if (s == "avx512") {
    if (!has_avx512()) return unsupported("quant kernels: this CPU has no avx512f/bw/vl");
    return &avx512_quant_kernels();
  }
  return invalid_argument("quant kernels: unknown isa '" + s + "' (avx512_vnni, avx512, avx2 or scalar)");
}

Status quant_matmul(ThreadPool& pool, const QuantMatmulRequest& r) {
  return quant_matmul(pool, r, best_quant_kernels());
}

Status quant_matmul(ThreadPool& pool, const QuantMatmulRequest& r, const QuantKernelTable& kt) {
  if (r.w == nullptr) return invalid_argument("quant_matmul: w is null");
  const quant::QuantWeight& qw = *r.w;
  if (static_cast<int64_t>(qw.q.size()) != qw.n * qw.ld_q())
    return invalid_argument("quant_matmul(" + qw.name + "): codes hold " + std::to_string(qw.q.size()) +
                            " bytes, expected " + std::to_string(qw.n * qw.ld_q()));
  return quant_matmul_view(pool, r, qw.view(), qw.name.c_str(), kt);
}

Status quant_matmul_view(ThreadPool& pool, const QuantMatmulRequest& r, const quant::QuantWeightView& w,
                         const char* name, const QuantKernelTable& kt) {
  const std::string who = std::string("quant_matmul(") + (name ? name : "") + "): ";
  if (r.m < 0) return invalid_argument(who + "m = " + std::to_string(r.m) + " is negative");
  if (r.m == 0 || w.n == 0) return Status::ok();
  if (r.x == nullptr || r.y == nullptr) return invalid_argument(who + "x or y is null");
  if (r.ld_x < w.k) return invalid_argument(who + "ld_x " + std::to_string(r.ld_x) + " < k " + std::to_string(w.k));
  if (r.ld_y < w.n) return invalid_argument(who + "ld_y " + std::to_string(r.ld_y) + " < n " + std::to_string(w.n));
  if (w.q == nullptr || w.scale == nullptr) return invalid_argument(who + "codes or scales are null");

  // x in the weight's internal input order, zero-padded to k_pad; per-group sums for offsets.
  const int64_t kp = w.k_pad, ng = w.n_groups;
  std::vector<float> xp(static_cast<size_t>(r.m * kp), 0.0f);
  for (int64_t i = 0; i < r.m; ++i) {
    const float* src = r.x + i * r.ld_x;
    float* dst = xp.data() + i * kp;
    if (w.k_perm == nullptr) {
      std::memcpy(dst, src, static_cast<size_t>(w.k) * sizeof(float));
    } else {
      for (int64_t j = 0; j < w.k; ++j) dst[j] = src[w.k_perm[j]];
    }
  }
  const bool int_codes = w.kind == quant::CodeKind::kQ8 || (w.kind == quant::CodeKind::kQ4 && w.lut_is_identity);
  if (r.m > kGemvMaxTokens && kt.gemm_i8 != nullptr && !r.exact_activations && int_codes)
    return gemm_int8_activations(pool, r, w, kt, xp);
  const bool int8_x = kt.gemv_i8 != nullptr && kt.quantize_x != nullptr && !r.exact_activations &&
                      r.m <= kGemvMaxTokens && int_codes;
  std::vector<float> xsum;
  if (w.offset != nullptr) {
    xsum.assign(static_cast<size_t>(r.m * ng), 0.0f);
    // With int8 x the sums are those of the rounded x, accumulated below; else of x itself.
    for (int64_t i = 0; i < r.m && !int8_x; ++i)
      for (int64_t g = 0; g < ng; ++g) {
        const int64_t j1 = std::min(w.k, (g + 1) * w.group);
        float s = 0;
        for (int64_t j = g * w.group; j < j1; ++j) s += xp[static_cast<size_t>(i * kp + j)];
        xsum[static_cast<size_t>(i * ng + g)] = s;
      }
  }
  QuantMatmulArgs a{.x = xp.data(), .ld_x = kp, .xsum = xsum.empty() ? nullptr : xsum.data(),
                    .bias = r.bias, .y = r.y, .ld_y = r.ld_y, .m = r.m,
                    .accumulate = r.accumulate, .w = w, .xq = nullptr, .ld_xq = 0,
                    .xd16 = nullptr, .ld_xd16 = 0};

  std::vector<int8_t> xq;
  std::vector<float> xd16, xd;
  if (int8_x) {
    // Symmetric int8 per 32-column block of x (llama.cpp's Q8_0 activations), laid out for the
    // kernel's integer dots (QuantMatmulArgs): int8 codes by pairs of blocks, whose 16 scales
    // match the lanes of one 64-byte dot; 4-bit codes by quads of blocks, 128 bytes each, whose
    // 16 scales match the lanes of the two dots a quad of codes makes.
    const bool q4 = w.kind == quant::CodeKind::kQ4;
    const int64_t n_blocks = kp / quant::kBlock, n_pairs = (n_blocks + 1) / 2, n_quads = n_blocks / 4;
    const int64_t ld_xq = n_pairs * 64, ld_xd = n_pairs * 16;
    xq.assign(static_cast<size_t>(r.m * ld_xq), 0);
    xd16.assign(static_cast<size_t>(r.m * ld_xd), 0.0f);
    xd.assign(static_cast<size_t>(r.m * n_blocks), 0.0f);
    std::vector<int8_t> q(static_cast<size_t>(kp));
    std::vector<int32_t> qc(static_cast<size_t>(n_blocks));
    for (int64_t i = 0; i < r.m; ++i) {
      float* d = xd.data() + i * n_blocks;
      kt.quantize_x(xp.data() + i * kp, kp, q.data(), d, qc.data());  // in order, per 32-block
      int8_t* row_q = xq.data() + i * ld_xq;
      for (int64_t b = 0; b < n_blocks; ++b) {
        const int8_t* src = q.data() + b * quant::kBlock;
        if (q4 && b / 4 < n_quads) {  // codes 0-15 in the quad's first 64 bytes, 16-31 in its second
          std::memcpy(row_q + (b / 4) * 128 + (b % 4) * 16, src, 16);
          std::memcpy(row_q + (b / 4) * 128 + 64 + (b % 4) * 16, src + 16, 16);
          std::fill_n(xd16.data() + i * ld_xd + (b / 4) * 16 + (b % 4) * 4, 4, d[b]);
        } else {
          std::memcpy(row_q + b * quant::kBlock, src, quant::kBlock);
          if (!q4) std::fill_n(xd16.data() + i * ld_xd + (b / 2) * 16 + (b % 2) * 8, 8, d[b]);
        }
        if (!xsum.empty())  // offsets meet the rounded x, as in the GEMM; qc = -128 * sum(q)
          xsum[static_cast<size_t>(i * ng + std::min(b * quant::kBlock / w.group, ng - 1))] +=
              d[b] * static_cast<float>(qc[static_cast<size_t>(b)] / -128);
      }
    }
    a.xq = xq.data();
    a.ld_xq = ld_xq;
    a.xd16 = xd16.data();
    a.ld_xd16 = ld_xd;
    a.xd = xd.data();
    a.ld_xd = n_blocks;
  }

  if (r.m <= kGemvMaxTokens) {
    const int64_t grain = std::max<int64_t>(16, kMinWorkPerThread / std::max<int64_t>(1, kp * r.m));
    pool.parallel_for(w.n, grain, [&](int64_t n0, int64_t n1) {
      if (int8_x)
        kt.gemv_i8(a, n0, n1);
      else
        kt.gemv(a, n0, n1);
    });
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
      ops::MatmulParams p{.x = xp.data(), .x_dtype = DType::kF32, .ld_x = kp, .w = ops::dense_weight(wf, DType::kF32), .bias = r.bias ? r.bias + r0 : nullptr,
                          .bias_dtype = DType::kF32, .y = r.y + r0, .y_dtype = DType::kF32,
                          .ld_y = r.ld_y, .m = r.m, .n = rows, .k = kp,
                          .accumulate = r.accumulate};
      if (dense.dense_f32.gemm)
        dense.dense_f32.gemm(p, 0, rows, pack);
      else
        dense.dense_f32.gemv(p, 0, rows);
    }
  });
  return Status::ok();
}

}  // namespace frugal::cpu
