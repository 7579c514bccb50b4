// Matmul harness cases for the quantized weight schemes (int8, int4, nf4, fp8 over the layout of
// ops/weight_format.h; issue 16 acceptance 1): random codes, scales, zero-point offsets and
// input permutations in a quant::QuantWeight, its WeightView uploaded to the backend, and the
// result against ops::ref::matmul on the dequantized weights (quant::dequantize: dense f32 in
// the original input order). GEMV and GEMM sizes (m 1..33), odd n and k (k not a multiple of
// 32 pads the rows), every group size (per channel, 32, 64, 128; partial last groups), FP8
// tensor / channel / block scales, act order, bias, accumulate and row gaps.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "harness.h"
#include "ops/quant/quant_weight.h"
#include "ops/reference.h"
#include "ops/weight_format_check.h"

namespace frugal::testing {
namespace {

struct QuantCase {
  ops::WeightScheme scheme;
  int64_t group;      // 0: per channel (the whole row)
  int64_t row_block;  // fp8: rows per scale (0: the whole tensor)
  bool offsets;       // int8 / int4 zero points
  bool act_order;
};

std::string case_name(const QuantCase& c) {
  return std::string(ops::weight_scheme_name(c.scheme)) + " g" + std::to_string(c.group) +
         (c.scheme == ops::WeightScheme::kFp8 ? " rows" + std::to_string(c.row_block) : "") +
         (c.offsets ? " zeros" : "") + (c.act_order ? " act_order" : "");
}

// A random n x k weight of case c, with values of order one.
quant::QuantWeight random_weight(const QuantCase& c, int64_t n, int64_t k, std::mt19937& rng) {
  using quant::CodeKind;
  const CodeKind kind = c.scheme == ops::WeightScheme::kInt8 ? CodeKind::kQ8
                        : c.scheme == ops::WeightScheme::kFp8 ? CodeKind::kF8
                                                              : CodeKind::kQ4;
  const int64_t k_pad = (k + 31) / 32 * 32;
  const int64_t group = c.group > 0 ? c.group : k_pad;
  const int64_t row_block = c.scheme == ops::WeightScheme::kFp8 ? (c.row_block > 0 ? c.row_block : n) : 1;
  quant::QuantWeight w = quant::make_quant_weight(kind, n, k, group, row_block);
  w.name = "harness";
  if (c.scheme == ops::WeightScheme::kInt4)
    for (int i = 0; i < 16; ++i) w.lut.push_back(static_cast<float>(i));
  if (c.scheme == ops::WeightScheme::kNf4) w.lut.assign(quant::kNf4Table, quant::kNf4Table + 16);
  if (c.scheme == ops::WeightScheme::kFp8) w.spec.source = c.row_block == 0 ? quant::SourceFormat::kFp8Tensor
                                                                              : quant::SourceFormat::kFp8Block;
  std::uniform_int_distribution<int> code8(-127, 127), code4(0, 15), fp8(0, 0xfe);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) {
      int code = 0;
      switch (kind) {
        case CodeKind::kQ8: code = code8(rng); break;
        case CodeKind::kQ4: code = code4(rng); break;
        case CodeKind::kF8:
          do code = fp8(rng) & 0xbf; while ((code & 0x7f) == 0x7f);  // |v| < 2, never NaN
          break;
      }
      quant::set_code(w, r, j, code);
    }
  const float unit = kind == CodeKind::kQ8 ? 1.0f / 64 : kind == CodeKind::kQ4 && c.scheme == ops::WeightScheme::kInt4 ? 1.0f / 8 : 1.0f;
  std::uniform_real_distribution<float> s(0.5f * unit, 1.5f * unit), z(-1.0f, 1.0f);
  for (float& v : w.scale) v = s(rng);
  if (c.offsets) {
    w.offset.resize(static_cast<size_t>(n * w.n_groups));
    for (float& v : w.offset) v = z(rng);
  }
  if (c.act_order) {
    w.k_perm.resize(static_cast<size_t>(k));
    std::iota(w.k_perm.begin(), w.k_perm.end(), 0);
    std::shuffle(w.k_perm.begin(), w.k_perm.end(), rng);
  }
  return w;
}

}  // namespace

void OpCases::matmul_quant() {
  using S = ops::WeightScheme;
  std::vector<QuantCase> cases;
  for (int64_t g : {0, 32, 64, 128}) {
    cases.push_back({S::kInt8, g, 1, false, false});
    cases.push_back({S::kInt8, g, 1, true, g == 64});
    cases.push_back({S::kInt4, g, 1, true, false});
    cases.push_back({S::kInt4, g, 1, false, g == 128});
    cases.push_back({S::kInt4, g, 1, true, g == 32});
    cases.push_back({S::kNf4, g, 1, false, false});
    cases.push_back({S::kFp8, g, g == 0 ? 0 : 1, false, false});
    cases.push_back({S::kFp8, g, 16, false, false});
  }
  cases.push_back({S::kFp8, 128, 128, false, false});  // DeepSeek-V3 blocks
  // m 9 / 20 / 33 take 2 / 4 / 8 token tiles per pass of the CUDA GEMV, m 80 its large-m path
  // (dequantize + cuBLASLt); k 4352 (34 int4 quads of 128) runs the GEMV's k loop more than once
  // per warp.
  const int64_t ms[] = {1, 3, 8, 9, 20, 33, 80};
  const std::pair<int64_t, int64_t> nks[] = {{13, 67}, {67, 160}, {130, 256}, {1, 300}, {5, 4352}};
  int variant = 0;
  for (const QuantCase& qc : cases)
    for (int64_t m : ms)
      for (auto [n, k] : nks) {
        if (variant++ % 3 != 0 && !(m == 1 || m == 33)) continue;  // every size for m 1 and 33; a third of the rest
        const bool has_bias = variant % 3 == 1, accumulate = variant % 4 >= 2;
        const int64_t x_gap = variant % 2 ? 3 : 0, y_gap = variant % 5 < 2 ? 5 : 0;
        quant::QuantWeight w = random_weight(qc, n, k, rng_);
        Result<ops::WeightView> host_view = quant::weight_view_of(w);
        ASSERT_TRUE(host_view.is_ok()) << host_view.status().to_string();
        const std::string fmt = ops::weight_format_name(host_view->format);
        const std::string what = "matmul m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                                 " " + case_name(qc) + " (" + fmt + ")" + (has_bias ? " bias" : "") +
                                 (accumulate ? " accumulate" : "");
        HostMat x(act(), m, k, k + x_gap), bias(act(), 1, n, n), y0(act(), m, n, n + y_gap);
        x.fill_random(rng_, 1.0f);
        bias.fill_random(rng_, 1.0f);
        y0.fill_random(rng_, 1.0f);
        auto dx = upload(x), db = upload(bias), dy = upload(y0);
        auto dq = upload(w.q), ds = upload(w.scale);
        auto dz = w.offset.empty() ? nullptr : upload(w.offset);
        auto dp = w.k_perm.empty() ? nullptr : upload(w.k_perm);
        ops::WeightView dv = *host_view;
        dv.data = dq->ptr();
        dv.scales = ds->ptr();
        dv.zeros = dz ? dz->ptr() : nullptr;
        dv.k_perm = dp ? static_cast<const int32_t*>(dp->ptr()) : nullptr;
        ops::MatmulParams p{.x = dx->ptr(), .x_dtype = act(), .ld_x = k + x_gap, .w = dv,
                            .bias = has_bias ? db->ptr() : nullptr, .bias_dtype = act(), .y = dy->ptr(),
                            .y_dtype = act(), .ld_y = n + y_gap, .m = m, .n = n, .k = k, .accumulate = accumulate};
        if (!ran(backend()->matmul(p), ops::OpKind::kMatmul, "w=" + fmt, what)) continue;
        HostMat got = download(*dy, y0), want = y0;
        const std::vector<float> deq = quant::dequantize(w);
        ops::MatmulParams r = p;
        r.x = x.data();
        r.w = ops::dense_weight(deq.data(), DType::kF32);
        r.bias = has_bias ? bias.data() : nullptr;
        r.y = want.data();
        ops::ref::matmul(r);
        // Paths that round x to int8 per 32 inputs (docs/quantization.md) for int8 and int4
        // weights: the AVX-512 VNNI GEMV (m <= 8) and the integer GEMM (m > 8) on AVX-512 VNNI
        // and AVX2. Each x_j moves by at most amax(its 32-block, in the weight's internal input
        // order) / 254, and offsets meet the same rounded x, so an output may differ by up to
        // sum_j |W_j| * amax(block of j) / 254, plus f32 rounding.
        const std::string bn = backend()->name();
        const bool int_w = qc.scheme == S::kInt8 || qc.scheme == S::kInt4;
        const bool int8_x = int_w && (bn == "cpu-avx512" || (bn == "cpu-avx2" && m > 8));
        // CUDA runs FP8 weights with per-tensor, per-channel or 128 x 128 scales as W8A8 above
        // 8 tokens (kFp8GemvMaxM; x rounded to E4M3 per token or per token and 128 inputs): each
        // x_j moves by at most |x_j| / 16, or (subnormal) amax(token) / 448 / 1024.
        const bool fp8_x = qc.scheme == S::kFp8 && bn == "cuda" && m > 8 &&
                           ((qc.group == 0 && qc.row_block <= 1) || (qc.group == 128 && qc.row_block == 128));
        if (fp8_x) {
          expect_within_fp8_act_bound(got, want, y0, x, deq, act_tol(), what);
        } else if (!int8_x) {
          EXPECT_TRUE(compare_mats(got, want, y0, act_tol(), what));
        } else {
          EXPECT_TRUE(compare_mats(got, want, y0, 1e30, what));  // gaps untouched, values finite
          const int64_t k_pad = w.k_pad;
          for (int64_t i = 0; i < m; ++i) {
            std::vector<double> dxb(static_cast<size_t>(k_pad / 32), 0.0);  // per internal 32-block
            for (int64_t j = 0; j < k; ++j) {
              const int64_t src = w.k_perm.empty() ? j : w.k_perm[static_cast<size_t>(j)];
              double& d = dxb[static_cast<size_t>(j / 32)];
              d = std::max(d, std::fabs(static_cast<double>(x.get(i, src))) / 254);
            }
            for (int64_t o = 0; o < n; ++o) {
              double bound = 0;
              for (int64_t j = 0; j < k; ++j) {  // internal column j is original column k_perm[j]
                const int64_t src = w.k_perm.empty() ? j : w.k_perm[static_cast<size_t>(j)];
                bound += std::fabs(deq[static_cast<size_t>(o * k + src)]) * dxb[static_cast<size_t>(j / 32)];
              }
              bound = bound * 1.001 + 1e-4 * (1 + std::fabs(want.get(i, o)));
              EXPECT_LE(std::fabs(got.get(i, o) - want.get(i, o)), bound) << what << " at [" << i << ", " << o << "]";
            }
          }
        }
        for (auto* b : {dx.get(), db.get(), dy.get(), dq.get(), ds.get(), dz.get(), dp.get()})
          if (b) {
            EXPECT_TRUE(b->check_guards(what));
          }
      }
}

}  // namespace frugal::testing
