// moe_experts with the shared experts (MoeExpertsParams::shared_*) and the tiny path
// (moe_tiny.cu) against ops::ref on the host: every path the op can take for the step (tiny,
// GEMV, streaming, WMMA, mma.sync; forced with the set_ switches), odd and aligned shapes,
// top_k 1..8, 1..3 tokens, without and with shared experts (three views, the gate_up view, a
// misaligned shared down, int8 shared experts the tiny kernels do not fuse), and an
// expert-parallel rank's subset.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace frugal::cuda::testing {
namespace {

// How the shared experts are passed.
enum class Shared {
  kNone,
  kViews,       // gate, up, down views (dense bf16)
  kGateUp,      // and shared_gate_up over gate and up back to back
  kMisaligned,  // shared down 2 bytes off 16-byte alignment (the tiny kernels' scalar loads)
  kInt8,        // per-channel int8 (the tiny path runs them as the backend's matmuls)
};
const char* shared_name(Shared s) {
  switch (s) {
    case Shared::kNone: return "no shared";
    case Shared::kViews: return "shared";
    case Shared::kGateUp: return "shared gate_up";
    case Shared::kMisaligned: return "shared misaligned";
    case Shared::kInt8: return "shared int8";
  }
  return "?";
}

struct Shape {
  int64_t hidden, inter, shared_inter, ld_x;
};

// One way to run the op: the switches and the path they must give.
struct PathRun {
  MoeStream stream;
  MoeMma mma;
  int tiny;  // moe_tiny_pairs (0: off)
  MoePath path;
  int early = 0;  // set_moe_tiny_early: the tiny kernels' shared-expert (1) and routed down (2) rows asked for before the PDL wait
};

// The shared experts' weights: gate_up [2 S, hidden] (gate rows, then up), down [hidden, S],
// dense bf16 (one spare element each, for the misaligned view) or int8 codes (rows of hidden or
// S rounded up to 32) with f32 scales per row; views of the device and of the host copies.
struct SharedWeights {
  std::unique_ptr<Tensor> gu, down, gu_scales, down_scales;
  ops::MoeExpertsParams dev_views{}, host_views{};  // only the shared_* fields are set

  SharedWeights(Shared mode, const Shape& s, std::mt19937& rng) {
    if (mode == Shared::kNone) return;
    const int64_t S = s.shared_inter, H = s.hidden;
    const bool int8 = mode == Shared::kInt8;
    const ops::WeightFormat f = int8 ? ops::quant_format(ops::WeightScheme::kInt8, H, 0, false, 1)
                                     : ops::dense_format(DType::kBF16);
    const ops::WeightFormat fd = int8 ? ops::quant_format(ops::WeightScheme::kInt8, S, 0, false, 1) : f;
    // Bytes of a gate / up row and of a down row (int8 rows hold k rounded up to 32 codes).
    const int64_t row = ops::weight_row_bytes(f, H), drow = ops::weight_row_bytes(fd, S);
    gu = std::make_unique<Tensor>(DType::kU8, 2 * S * row + 2);
    down = std::make_unique<Tensor>(DType::kU8, H * drow + 2);
    gu_scales = std::make_unique<Tensor>(DType::kF32, 2 * S);
    down_scales = std::make_unique<Tensor>(DType::kF32, H);
    if (int8) {
      // Random codes, 0 in each row's padding past k.
      for (const auto& [t, r, k] : {std::tuple{gu.get(), row, H}, std::tuple{down.get(), drow, S}})
        for (size_t i = 0; i < t->host.size(); ++i) t->host[i] = static_cast<int64_t>(i) % r < k ? static_cast<uint8_t>(rng()) : 0;
      gu_scales->fill_uniform(rng, 0.001f, 0.003f);
      down_scales->fill_uniform(rng, 0.001f, 0.003f);
    } else {
      std::uniform_real_distribution<float> d(-0.3f, 0.3f);
      for (Tensor* t : {gu.get(), down.get()})
        for (size_t i = 0; i + 1 < t->host.size(); i += 2) ops::ref::store(DType::kBF16, t->host.data(), static_cast<int64_t>(i / 2), d(rng));
    }
    for (Tensor* t : {gu.get(), down.get(), gu_scales.get(), down_scales.get()}) t->to_device();
    auto fill = [&](ops::MoeExpertsParams& q, uint8_t* g, uint8_t* d, float* gs, float* ds) {
      auto view = [&](uint8_t* data, const ops::WeightFormat& wf, const float* scales) {
        ops::WeightView v;
        v.data = data;
        v.format = wf;
        v.scales = int8 ? scales : nullptr;
        return v;
      };
      q.shared_inter = S;
      q.shared_gate = view(g, f, gs);
      q.shared_up = view(g + S * row, f, gs + S);
      q.shared_down = view(d + (mode == Shared::kMisaligned ? 2 : 0), fd, ds);
      if (mode == Shared::kGateUp) q.shared_gate_up = q.shared_gate;
    };
    fill(dev_views, static_cast<uint8_t*>(gu->dev), static_cast<uint8_t*>(down->dev), static_cast<float*>(gu_scales->dev),
         static_cast<float*>(down_scales->dev));
    fill(host_views, gu->host.data(), down->host.data(), reinterpret_cast<float*>(gu_scales->host.data()),
         reinterpret_cast<float*>(down_scales->host.data()));
  }
  void set(ops::MoeExpertsParams& q, bool device) const {
    const ops::MoeExpertsParams& v = device ? dev_views : host_views;
    q.shared_inter = v.shared_inter;
    q.shared_gate = v.shared_gate;
    q.shared_up = v.shared_up;
    q.shared_down = v.shared_down;
    q.shared_gate_up = v.shared_gate_up;
  }
};

// n_tok tokens, each on top_k distinct random experts of n_routed (random weights); this call
// holds experts [first, first + n_local) (all of them when first = 0 and n_local = n_routed).
// Each run in `runs` starts from the same out and must match the reference.
void check_moe(int64_t n_tok, int32_t top_k, int32_t n_routed, int32_t first, int32_t n_local, const Shape& s, Shared mode,
               const std::vector<PathRun>& runs) {
  const std::string name = "moe_experts tokens=" + std::to_string(n_tok) + " top_k=" + std::to_string(top_k) + " experts=" +
                           std::to_string(first) + ".." + std::to_string(first + n_local - 1) + " of " +
                           std::to_string(n_routed) + " hidden=" + std::to_string(s.hidden) + " inter=" +
                           std::to_string(s.inter) + " " + shared_name(mode) +
                           (mode != Shared::kNone ? "=" + std::to_string(s.shared_inter) : "");
  std::mt19937 rng(static_cast<unsigned>(n_tok * 131 + top_k * 17 + s.hidden + static_cast<int>(mode)));
  Tensor x(DType::kBF16, n_tok * s.ld_x), out(DType::kBF16, n_tok * s.hidden);
  x.fill_uniform(rng, -1, 1);
  out.fill_uniform(rng, -1, 1);
  x.to_device();
  std::vector<std::unique_ptr<Tensor>> w;  // gate[n_local], up[n_local], down[n_local]
  std::vector<ops::WeightView> views, hviews;
  for (int m = 0; m < 3 * n_local; ++m) {
    w.push_back(std::make_unique<Tensor>(DType::kBF16, s.hidden * s.inter));
    w.back()->fill_uniform(rng, -0.3f, 0.3f);
    w.back()->to_device();
    views.push_back(ops::dense_weight(w.back()->dev, DType::kBF16));
    hviews.push_back(ops::dense_weight(w.back()->host.data(), DType::kBF16));
  }
  Tensor dviews(DType::kF32, static_cast<int64_t>((views.size() * sizeof(ops::WeightView) + 3) / 4));
  std::memcpy(dviews.host.data(), views.data(), views.size() * sizeof(ops::WeightView));
  dviews.to_device();
  const SharedWeights sw(mode, s, rng);
  std::vector<int32_t> idx(static_cast<size_t>(n_tok * top_k)), perm(static_cast<size_t>(n_routed));
  std::vector<float> wt(idx.size());
  for (int64_t t = 0; t < n_tok; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int32_t k = 0; k < top_k; ++k) {
      idx[static_cast<size_t>(t * top_k + k)] = perm[static_cast<size_t>(k)];
      wt[static_cast<size_t>(t * top_k + k)] = std::uniform_real_distribution<float>(0.f, 1.f)(rng);
    }
  }
  const int64_t S = mode == Shared::kNone ? 0 : s.shared_inter;
  const int64_t scratch_bytes = ops::moe_experts_scratch_bytes(n_tok, top_k, n_local, s.hidden, s.inter, S);
  Tensor scratch(DType::kF32, scratch_bytes / 4);
  DevInts di;
  const auto* dv = static_cast<const ops::WeightView*>(dviews.dev);
  ops::MoeExpertsParams p{.x = x.dev, .act_dtype = DType::kBF16, .ld_x = s.ld_x, .out = out.dev, .ld_out = s.hidden,
                          .n_tokens = n_tok, .hidden = s.hidden, .inter = s.inter, .n_experts = n_local, .top_k = top_k,
                          .topk_idx = di(idx), .topk_weight = di.floats(wt), .gate = dv, .up = dv + n_local,
                          .down = dv + 2 * n_local, .format = views[0].format, .scratch = scratch.dev,
                          .scratch_bytes = scratch_bytes, .first_expert = first, .n_routed = n_routed};
  if (mode != Shared::kNone) sw.set(p, true);
  std::vector<uint8_t> want = out.host;
  ops::MoeExpertsParams r = p;
  r.x = x.host.data(), r.out = want.data(), r.topk_idx = idx.data(), r.topk_weight = wt.data();
  r.gate = hviews.data(), r.up = hviews.data() + n_local, r.down = hviews.data() + 2 * n_local;
  if (mode != Shared::kNone) sw.set(r, false);
  ops::ref::moe_experts(r);
  const MoeMma mma_was = moe_mma();
  const MoeStream stream_was = moe_stream();
  for (const PathRun& run : runs) {
    const std::string what = name + " " + moe_path_name(run.path);
    out.to_device();  // the starting values again
    set_moe_stream(run.stream);
    set_moe_mma(run.mma);
    set_moe_tiny_pairs(run.tiny);
    set_moe_tiny_early(run.early);
    EXPECT_EQ(moe_experts_path(p), run.path) << what << ": ran " << moe_path_name(moe_experts_path(p));
    // The tiny path fuses dense bf16 shared experts only; the others run as the backend's ops.
    EXPECT_EQ(moe_experts_fuses_shared(p),
              run.path == MoePath::kTiny && mode != Shared::kNone && mode != Shared::kInt8) << what;
    const Status st = backend()->moe_experts(p);
    set_moe_stream(stream_was);
    set_moe_mma(mma_was);
    set_moe_tiny_pairs(-1);
    set_moe_tiny_early(-1);
    ASSERT_TRUE(st.is_ok()) << what << ": " << st.to_string();
    expect_close(out, want, tol_for(DType::kBF16), what);
    std::vector<uint8_t> scratch_host;
    scratch.from_device(&scratch_host, what + " scratch");  // its guard bytes
  }
}

// Aligned sizes; multiples of 8 that are not of 64 with the shared down misaligned where asked
// (shared_inter one channel-block past inter); odd sizes with a padded x row (every load scalar).
const Shape kShapes[] = {{256, 192, 128, 256}, {200, 136, 72, 200}, {37, 21, 19, 42}};

const PathRun kTiny{MoeStream::kDecode, MoeMma::kOff, 64, MoePath::kTiny};
const PathRun kTinyEarly{MoeStream::kDecode, MoeMma::kOff, 64, MoePath::kTiny, 1};
const PathRun kTinyEarlyRouted{MoeStream::kDecode, MoeMma::kOff, 64, MoePath::kTiny, 2};
const PathRun kGemv{MoeStream::kDecode, MoeMma::kOff, 0, MoePath::kGemv};
const PathRun kStreamAll{MoeStream::kAll, MoeMma::kOff, 0, MoePath::kStream};

// Decode-sized steps: 1..3 tokens, top_k 1..8 of 10 experts (up to 24 pairs: the tiny path
// asked for up to 64), on the tiny path (its shared-expert loads after and before the PDL wait),
// the GEMVs and the streaming kernels, with and without shared experts.
TEST(CudaMoe, SharedExpertsDecodePaths) {
  for (const Shape& s : kShapes)
    for (int32_t top_k = 1; top_k <= 8; ++top_k)
      for (int64_t n_tok = 1; n_tok <= 3; ++n_tok)
        for (Shared mode : {Shared::kNone, Shared::kViews, Shared::kGateUp}) {
          // Every path once per shape and mode; the tiny path at every size.
          const bool all = (top_k + n_tok) % 3 == 0;
          check_moe(n_tok, top_k, 10, 0, 10, s, mode,
                    all ? std::vector<PathRun>{kTiny, kTinyEarly, kTinyEarlyRouted, kGemv, kStreamAll}
                        : std::vector<PathRun>{kTiny, kTinyEarly, kTinyEarlyRouted});
        }
}

// The shared down row 2 bytes off alignment (the tiny down kernel's scalar loads for the whole
// row), and int8 shared experts (not fused: the tiny path's routed kernels, then the backend's
// quantized matmuls), each on every decode path.
TEST(CudaMoe, SharedExpertsMisalignedAndQuantized) {
  for (Shared mode : {Shared::kMisaligned, Shared::kInt8})
    for (int64_t n_tok : {1, 2})
      check_moe(n_tok, 6, 10, 0, 10, kShapes[1], mode, {kTiny, kTinyEarly, kTinyEarlyRouted, kGemv, kStreamAll});
}

// The default bound: batch 1 and 2 at top-6 and top-8 take the tiny path without any switch,
// 3 tokens at top-6 (18 pairs) the GEMVs.
TEST(CudaMoe, TinyPathByDefault) {
  const PathRun tiny_default{MoeStream::kDecode, MoeMma::kOff, -1, MoePath::kTiny},
      gemv_default{MoeStream::kDecode, MoeMma::kOff, -1, MoePath::kGemv};
  if (moe_tiny_pairs() != kMoeTinyPairs) GTEST_SKIP() << "FRUGAL_MOE_TINY is set";
  for (int32_t top_k : {6, 8})
    for (int64_t n_tok : {1, 2}) check_moe(n_tok, top_k, 64, 0, 64, kShapes[0], Shared::kViews, {tiny_default});
  check_moe(3, 6, 64, 0, 64, kShapes[0], Shared::kViews, {gemv_default});
}

// Prefill-sized steps with shared experts (40 tokens x top-2 of 10: 8 rows per expert): the
// streaming kernels (default), the 16-row WMMA tiles, the mma.sync kernels.
TEST(CudaMoe, SharedExpertsGroupedPaths) {
  for (const Shape& s : kShapes)
    for (Shared mode : {Shared::kViews, Shared::kGateUp})
      check_moe(40, 2, 10, 0, 10, s, mode,
                {{MoeStream::kDecode, MoeMma::kOff, 0, MoePath::kStream},
                 {MoeStream::kOff, MoeMma::kOff, 0, MoePath::kWmma16},
                 {MoeStream::kOff, MoeMma::kDecode, 0, MoePath::kMma}});
}

// An expert-parallel rank (experts 3..6 of 10) with the shared experts: pairs routed elsewhere
// add nothing on every path; the shared experts are added whole.
TEST(CudaMoe, SharedExpertsSubset) {
  for (const Shape& s : kShapes)
    for (int64_t n_tok = 1; n_tok <= 3; ++n_tok)
      check_moe(n_tok, 6, 10, 3, 4, s, Shared::kViews, {kTiny, kTinyEarly, kTinyEarlyRouted, kGemv, kStreamAll});
}

}  // namespace
}  // namespace frugal::cuda::testing
