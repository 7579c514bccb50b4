// The quantized GEMMs called directly (launch_quant_gemm, all three kernels: the pipelined one of
// quant_gemm_pipe.cu, the first, one-quad one of quant_gemv.cu and the slab one of
// quant_gemm_slab.cu), in every block shape, split as the backend splits them and in one split
// (what a capture without scratch runs; the slab GEMM then runs the GEMV where the whole k does
// not fit its shared memory), against
// ops::ref::matmul on the weight dequantized on the host (quant::dequantize, double precision):
// int4 g128 with and without zero points, int8 per channel with and without, fp8 128 x 128
// blocks; m 9 / 16 / 33 / 64 (2, 2, 8 and 8 token tiles; the slab GEMM also 5: 1 tile); odd n (a partial row tile and block)
// and k (a partial last quad), strided x and y, bias, accumulation into y.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cuda/kernels.h"
#include "cuda_quant_util.h"
#include "cuda_test_util.h"
#include "ops/quant/quant_weight.h"

namespace frugal::cuda::testing {
namespace {

// One case's inputs: x [m][k + 8], bias [n] and y0 [m][n + 3] random (x and the bias on the
// device), and the oracle's y: ops::ref::matmul over the weight dequantized on the host (from y0
// when accumulating).
struct CaseInputs {
  CaseInputs(const DeviceWeight& dw, int64_t m, bool bias, bool accumulate, std::mt19937& rng)
      : ld_x(dw.w.k + 8), ld_y(dw.w.n + 3), x(DType::kBF16, m * ld_x), b(DType::kBF16, dw.w.n), y0(DType::kBF16, m * ld_y) {
    x.fill_uniform(rng, -1, 1);
    b.fill_uniform(rng, -1, 1);
    y0.fill_uniform(rng, -1, 1);
    x.to_device();
    b.to_device();
    want = y0.host;
    ops::MatmulParams r{x.host.data(), DType::kBF16, ld_x, ops::dense_weight(dw.deq.data(), DType::kF32),
                        bias ? b.host.data() : nullptr, DType::kBF16, want.data(), DType::kBF16, ld_y, m, dw.w.n, dw.w.k,
                        accumulate};
    ops::ref::matmul(r);
  }
  int64_t ld_x, ld_y;
  Tensor x, b, y0;
  std::vector<uint8_t> want;
};

// Columns [from, ld) of the m rows of bf16 `t` (row stride ld) still hold `before`'s values.
void expect_untouched(const Tensor& t, const std::vector<uint8_t>& before, int64_t m, int64_t from, int64_t ld,
                      const std::string& what) {
  std::vector<uint8_t> got;
  t.from_device(&got, what);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = from; j < ld; ++j)
      ASSERT_EQ(ops::ref::load(DType::kBF16, got.data(), i * ld + j), ops::ref::load(DType::kBF16, before.data(), i * ld + j))
          << what << ": written at [" << i << ", " << j << "]";
}

struct Kernel {
  QuantGemmKernel kernel;
  const char* name;
  std::vector<std::pair<int, int>> shapes;  // (warps, row tiles); slab: (quads in flight, row tiles); (0, 0): the default
  std::vector<std::pair<int, int>> limits = {{0, 0}};  // slab: set_quant_slab_limits(blocks, smem KB); (0, 0): the default
  int chains = 1;  // slab: set_quant_slab_chains
  int wg = 0;      // slab: set_quant_slab_wg(wg, 9) (the warpgroup kernel: int4 from 9 tokens, each pass)
};

TEST(CudaQuantGemm, BothKernelsEveryShapeAgainstDequantizedReference) {
  const QFormat formats[] = {{"int4 g128 zeros", quant::CodeKind::kQ4, 128, 1, true},
                             {"int4 g128", quant::CodeKind::kQ4, 128, 1, false},
                             {"int8 channel", quant::CodeKind::kQ8, 0, 1, false},
                             {"int8 channel zeros", quant::CodeKind::kQ8, 0, 1, true},
                             {"fp8 128x128", quant::CodeKind::kF8, 128, 128, false}};
  // The slab GEMM also with one row band (every warp walks several row groups, storing each)
  // and with 8 KB slices (a quad or two each: many slices and partials).
  const Kernel kernels[] = {{QuantGemmKernel::kPipe, "pipe", {{0, 0}, {8, 1}, {8, 2}}},
                            {QuantGemmKernel::kQuad, "quad", {{0, 0}, {4, 1}, {8, 1}, {4, 2}}},
                            {QuantGemmKernel::kSlab, "slab", {{0, 0}, {4, 1}, {2, 1}}, {{0, 0}, {1, 0}, {1, 8}, {0, 8}}},
                            // two mma chains a token tile (the default): every shape, one band and many slices
                            {QuantGemmKernel::kSlab, "slab 2 chains", {{0, 0}, {4, 1}, {2, 1}}, {{0, 0}, {1, 8}}, 2},
                            // the warpgroup kernel (int4 from 9 tokens; the mma.sync kernel for the other formats):
                            // the default plan, one row band, one block with many slices of a quad
                            {QuantGemmKernel::kSlab, "slab wg", {{0, 0}}, {{0, 0}, {1, 0}, {1, 8}}, 2, 1}};
  // n 300: one partial 128-row block (and a partial 16-row tile); k 1416: 12 int4 quads, the last
  // with one chunk of 4 (22 8-bit quads, the last with 2); n 2050 x k 4352: many units per block.
  const std::pair<int64_t, int64_t> nks[] = {{300, 1416}, {2050, 4352}};
  std::mt19937 rng(18);
  int variant = 0;
  for (const QFormat& f : formats)
    for (auto [n, k] : nks) {
      const std::unique_ptr<DeviceWeight> dw = device_weight(f, n, k, rng);
      ASSERT_NE(dw, nullptr);
      const ops::WeightView& dv = dw->view;
      for (int64_t m : {5, 9, 16, 24, 33, 47, 64}) {
        const bool bias = variant % 2 == 0, accumulate = variant % 3 == 1;
        ++variant;
        CaseInputs in(*dw, m, bias, accumulate, rng);
        const int64_t ld_x = in.ld_x, ld_y = in.ld_y;
        const Tensor &x = in.x, &b = in.b, &y0 = in.y0;
        const std::vector<uint8_t>& want = in.want;
        std::vector<bool> mask(static_cast<size_t>(m * ld_y));
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) mask[static_cast<size_t>(i * ld_y + j)] = true;
        for (const Kernel& kn : kernels)
          for (auto [wp, rt] : kn.shapes)
            for (auto [blocks, smem_kb] : kn.limits)
              for (bool split : {true, false}) {
                if (m < 9 && kn.kernel != QuantGemmKernel::kSlab) continue;  // the others start at 9 tokens
                set_quant_gemm_kernel(kn.kernel);
                set_quant_gemm_tuning(wp, rt);
                set_quant_slab_limits(blocks, smem_kb);
                set_quant_slab_chains(kn.chains);
                set_quant_slab_wg(kn.wg, 9);
                Tensor y(DType::kBF16, m * ld_y);
                y.host = y0.host;
                y.to_device();
                ops::MatmulParams p{x.dev, DType::kBF16, ld_x, dv, bias ? b.dev : nullptr, DType::kBF16, y.dev,
                                    DType::kBF16, ld_y, m, n, k, accumulate};
                ASSERT_TRUE(quant_gemv_supported(p));
                const int splits = split ? quant_gemm_splits(p, backend()->n_sms()) : 1;
                const size_t bytes = quant_gemm_scratch_bytes(p, splits);
                void* partials = bytes ? backend()->alloc(bytes).value() : nullptr;
                ASSERT_EQ(launch_quant_gemm(p, splits, partials, backend()->stream()), cudaSuccess);
                ASSERT_EQ(cudaStreamSynchronize(backend()->stream()), cudaSuccess);
                if (partials) backend()->free(partials);
                const std::string limits =
                    blocks || smem_kb ? " blocks " + std::to_string(blocks) + " smem " + std::to_string(smem_kb) + "KB" : "";
                const std::string what = std::string(kn.name) + " w" + std::to_string(wp) + "r" + std::to_string(rt) + limits + " " +
                                         f.name + " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" +
                                         std::to_string(k) + " splits=" + std::to_string(splits) + (bias ? " bias" : "") +
                                         (accumulate ? " accumulate" : "");
                expect_close(y, want, 2e-2f, what, mask);
                expect_untouched(y, y0.host, m, n, ld_y, what);  // the ld_y gaps
              }
      }
    }
  set_quant_gemm_kernel(QuantGemmKernel::kDefault);
  set_quant_gemm_tuning(0, 0);
  set_quant_slab_limits(0, 0);
  set_quant_slab_chains(0);
  set_quant_slab_wg(-1, 0);
}

// The GEMV at m <= 8 (launch_quant_gemv), all three kernels: the tile GEMV, the lean one (1, 2 by
// the default rule for these few tiles, and 4 quads a warp iteration; with and without its early
// start, its L2 request and its shared-memory ring of 3 or 5 quads a warp; bit for bit the tile
// GEMV's, the partial last quad included) and the
// bulk one of quant_gemv_bulk.cu in its shapes (4 / 8 consumer warps, 1..4 ring stages, one
// block an SM so that a block walks many row tiles and the ring wraps across them), plain (bias,
// accumulation into y, strided x and y) and with the silu epilogue, against the same oracle:
// n 300 / 2050 / 40 (partial 16-row tiles; 19 / 129 / 3 silu tiles), k 1416 (a partial last
// quad), 4352 and 9480 (int4 rows of 5 ring segments, the last partial).
TEST(CudaQuantGemv, TileAndBulkKernelsAgainstDequantizedReference) {
  const QFormat formats[] = {{"int4 g128 zeros", quant::CodeKind::kQ4, 128, 1, true},
                             {"int4 g128", quant::CodeKind::kQ4, 128, 1, false},
                             {"int8 channel", quant::CodeKind::kQ8, 0, 1, false},
                             {"int8 channel zeros", quant::CodeKind::kQ8, 0, 1, true},
                             {"fp8 128x128", quant::CodeKind::kF8, 128, 128, false}};
  struct Variant {
    QuantGemvKernel kernel;
    int warps, stages, blocks;  // the bulk kernel's shape (0: its default rule); lean: blocks = quads a warp iteration
    int early = 1;              // lean: the first codes before pdl_wait() (the default) or after
    int l2 = 0;                 // lean: bytes of each row asked of L2 at the block's start (set_quant_gemv_l2)
    int ring = 0;               // lean: the shared-memory ring's depth (set_quant_gemv_ring; 0: registers)
  };
  const Variant variants[] = {{QuantGemvKernel::kTile, 0, 0, 0},
                              {QuantGemvKernel::kLean, 0, 0, 0},
                              {QuantGemvKernel::kLean, 0, 0, 0, 0},  // without the early start
                              {QuantGemvKernel::kLean, 0, 0, 1},  // blocks: 1 quad a warp iteration
                              {QuantGemvKernel::kLean, 0, 0, 4},  // 4 quads
                              {QuantGemvKernel::kLean, 0, 0, 0, 1, 1 << 20},  // whole rows asked of L2
                              {QuantGemvKernel::kLean, 0, 0, 0, 0, 272},      // their first 272 bytes, late start
                              {QuantGemvKernel::kLean, 0, 0, 0, 1, 0, 3},     // the ring of 3 quads a warp
                              {QuantGemvKernel::kLean, 0, 0, 0, 0, 0, 5},     // of 5, late start
                              {QuantGemvKernel::kBulk, 0, 0, 0},
                              {QuantGemvKernel::kBulk, 4, 1, 1},
                              {QuantGemvKernel::kBulk, 8, 2, 1},
                              {QuantGemvKernel::kBulk, 4, 3, 0}};
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  const std::pair<int64_t, int64_t> nks[] = {{300, 1416}, {2050, 4352}, {40, 9480}};
  std::mt19937 rng(19);
  int variant = 0;
  for (const QFormat& f : formats)
    for (auto [n, k] : nks) {
      const std::unique_ptr<DeviceWeight> dw = device_weight(f, n, k, rng);
      ASSERT_NE(dw, nullptr);
      const ops::WeightView& dv = dw->view;
      for (int64_t m : {1, 3, 8})
        for (bool silu : {false, true}) {
          const bool bias = variant % 2 == 0, accumulate = !silu && variant % 3 == 1;
          ++variant;
          CaseInputs in(*dw, m, bias, accumulate, rng);
          const int64_t ld_x = in.ld_x, ld_y = in.ld_y, half = n / 2, ld_out = half + 5;
          const Tensor &x = in.x, &b = in.b, &y0 = in.y0;
          const std::vector<uint8_t>& want = in.want;
          // silu: out[t][c] = silu(y[t][c]) * y[t][half + c], each rounded to bf16 first (as the kernels do).
          Tensor out0(DType::kBF16, m * ld_out);
          out0.fill_uniform(rng, -1, 1);
          std::vector<uint8_t> want_out = out0.host;
          std::vector<bool> mask(static_cast<size_t>(silu ? m * ld_out : m * ld_y));
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < (silu ? half : n); ++j) {
              mask[static_cast<size_t>(i * (silu ? ld_out : ld_y) + j)] = true;
              if (!silu) continue;
              const float g = ops::ref::load(DType::kBF16, want.data(), i * ld_y + j);
              const float u = ops::ref::load(DType::kBF16, want.data(), i * ld_y + half + j);
              ops::ref::store(DType::kBF16, want_out.data(), i * ld_out + j, g / (1.f + std::exp(-g)) * u);
            }
          std::vector<uint8_t> tile_y, tile_out;  // the tile kernel's bytes: the lean kernel's must equal them
          for (const Variant& v : variants) {
            const bool lean = v.kernel == QuantGemvKernel::kLean;
            set_quant_gemv_kernel(v.kernel);
            set_quant_gemv_bulk_tuning(lean ? 0 : v.warps, lean ? 0 : v.stages, lean ? 0 : v.blocks);
            set_quant_gemv_tuning(lean ? v.blocks : -1, -1);
            set_quant_gemv_early(v.early);
            set_quant_gemv_l2(v.l2);
            set_quant_gemv_ring(v.ring);
            Tensor y(DType::kBF16, m * ld_y), out(DType::kBF16, m * ld_out);
            y.host = y0.host;
            y.to_device();
            out.host = out0.host;
            out.to_device();
            ops::MatmulParams p{x.dev, DType::kBF16, ld_x, dv, bias ? b.dev : nullptr, DType::kBF16, y.dev,
                                DType::kBF16, ld_y, m, n, k, accumulate};
            ASSERT_TRUE(quant_gemv_supported(p));
            const bool bulk = v.kernel == QuantGemvKernel::kBulk;
            if (bulk && major < 9) continue;  // the bulk kernel is sm_90's
            ASSERT_EQ(quant_gemv_bulk_ok(p), bulk) << "the kernel asked for is the one launched";
            const SiluMulOut so{.out = out.dev, .ld_out = ld_out};
            ASSERT_EQ(launch_quant_gemv(p, backend()->stream(), silu ? &so : nullptr), cudaSuccess);
            ASSERT_EQ(cudaStreamSynchronize(backend()->stream()), cudaSuccess);
            const std::string what = std::string(bulk ? "bulk" : lean ? (v.early ? "lean" : "lean (late start)") : "tile") +
                                     (v.l2 ? " L2 " + std::to_string(v.l2) : "") + (v.ring ? " ring " + std::to_string(v.ring) : "") +
                                     " w" + std::to_string(v.warps) +
                                     " stages " + std::to_string(v.stages) + " blocks " + std::to_string(v.blocks) + " " + f.name +
                                     " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                                     (silu ? " silu" : "") + (bias ? " bias" : "") + (accumulate ? " accumulate" : "");
            if (v.kernel == QuantGemvKernel::kTile) {
              y.from_device(&tile_y, what);
              out.from_device(&tile_out, what);
            } else if (lean) {  // same quads, same arithmetic, same order: the same bits
              std::vector<uint8_t> got_y, got_out;
              y.from_device(&got_y, what);
              out.from_device(&got_out, what);
              EXPECT_TRUE(got_y == tile_y) << what << ": the lean GEMV's y differs from the tile GEMV's";
              EXPECT_TRUE(got_out == tile_out) << what << ": the lean GEMV's out differs from the tile GEMV's";
            }
            if (silu) {
              expect_close(out, want_out, 2e-2f, what, mask);
              expect_untouched(y, y0.host, m, 0, ld_y, what);  // y is not written
              expect_untouched(out, out0.host, m, half, ld_out, what);
              continue;
            }
            expect_close(y, want, 2e-2f, what, mask);
            expect_untouched(y, y0.host, m, n, ld_y, what);
          }
        }
    }
  set_quant_gemv_kernel(QuantGemvKernel::kDefault);
  set_quant_gemv_bulk_tuning(0, 0, 0);
  set_quant_gemv_tuning(-1, -1);
  set_quant_gemv_early(-1);
  set_quant_gemv_l2(-1);
  set_quant_gemv_ring(-1);
}

// Past the GEMM's tokens (m > kQuantGemvMaxM) a quantized matmul is the weight dequantized to
// bf16 and cuBLASLt; a weight larger than the dequantization's scratch (a quantized lm_head,
// vocab x hidden, into f32 logits) goes a slice of rows at a time, and where no slice fits,
// the GEMV in passes. Through CudaBackend::matmul with f32 y (the logits head's; it also keeps
// FP8 weights off W8A8), against the dequantized oracle: int4 g128 with zero points, int8 per
// channel, fp8 128 x 128 (slices on its 128-row scale blocks); n 2050 (a partial last slice),
// whole / 3 slices / 1 slice of 128 rows, and no slice (the GEMV).
TEST(CudaQuantMatmul, DequantizedInRowSlicesPastTheGemmTokens) {
  const QFormat formats[] = {{"int4 g128 zeros", quant::CodeKind::kQ4, 128, 1, true},
                             {"int8 channel", quant::CodeKind::kQ8, 0, 1, false},
                             {"fp8 128x128", quant::CodeKind::kF8, 128, 128, false}};
  const int64_t n = 2050, k = 1416, m = 100;
  std::mt19937 rng(19);
  for (const QFormat& f : formats) {
    const std::unique_ptr<DeviceWeight> dw = device_weight(f, n, k, rng);
    ASSERT_NE(dw, nullptr);
    Tensor x(DType::kBF16, m * k), b(DType::kF32, n);
    x.fill_uniform(rng, -1, 1);
    b.fill_uniform(rng, -1, 1);
    x.to_device();
    b.to_device();
    std::vector<uint8_t> want(static_cast<size_t>(m * n * 4));
    ops::ref::matmul({x.host.data(), DType::kBF16, k, ops::dense_weight(dw->deq.data(), DType::kF32), b.host.data(),
                      DType::kF32, want.data(), DType::kF32, n, m, n, k, false});
    const size_t row = static_cast<size_t>(k) * 2;
    for (size_t cap : {size_t{1} << 30, row * 700, row * 128, size_t{1}}) {
      backend()->set_dequant_scratch_max(cap);
      Tensor y(DType::kF32, m * n);
      ops::MatmulParams p{x.dev, DType::kBF16, k, dw->view, b.dev, DType::kF32, y.dev, DType::kF32, n, m, n, k, false};
      const Status st = backend()->matmul(p);
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      ASSERT_EQ(cudaStreamSynchronize(backend()->stream()), cudaSuccess);
      expect_close(y, want, 2e-2f, std::string(f.name) + " dequant scratch " + std::to_string(cap) + " bytes");
    }
  }
  backend()->set_dequant_scratch_max(size_t{512} << 20);
}


// int4 and int8 codes re-laid into kOutInTiles8 by CudaBackend::prepare_weight (what WeightStore::place
// asks of it): the bytes where ops/weight_format.h's formula puts them (computed here from the
// row-major codes), and every path that reads the layout (tile and lean GEMVs, the lean one
// also through its shared-memory ring, with and without the silu epilogue, the bulk GEMV asked for, the slab GEMM also when another GEMM is
// configured, the dequantization + cuBLASLt, the GEMV in passes, the correctness kernel) with
// the same bits as on the row-major copy, and within bf16 of the dequantized oracle. n 296: a
// partial 16-row tile, and with the silu epilogue up rows 148 on (not a tile boundary). Weights
// the layout does not fit (n % 8, a partial quad, fp8) or FRUGAL_QUANT_TILES=0 stay as they are.
TEST(CudaInt4Tiles8, EveryPathReadsTheTiledCodesAsTheRowMajorOnes) {
  const QFormat formats[] = {{"int4 g128 zeros", quant::CodeKind::kQ4, 128, 1, true},
                             {"int4 channel", quant::CodeKind::kQ4, 0, 1, false},
                             {"int8 channel zeros", quant::CodeKind::kQ8, 0, 1, true}};
  const std::pair<int64_t, int64_t> nks[] = {{296, 1408}, {2048, 4352}};
  std::mt19937 rng(20);
  int variant = 0;
  for (const QFormat& f : formats)
    for (auto [n, k] : nks) {
      const std::unique_ptr<DeviceWeight> dw = device_weight(f, n, k, rng);
      ASSERT_NE(dw, nullptr);
      const ops::WeightView& rv = dw->view;  // row-major
      Tensor tcodes(DType::kU8, static_cast<int64_t>(dw->w.q.size()));
      std::memcpy(tcodes.host.data(), dw->w.q.data(), dw->w.q.size());
      tcodes.to_device();
      ops::WeightView tv = rv;
      tv.data = tcodes.dev;
      Result<ops::WeightFormat> tf = backend()->prepare_weight(tv, n, k);
      ASSERT_TRUE(tf.is_ok()) << tf.status().to_string();
      ASSERT_EQ(tf->layout, ops::WeightLayout::kOutInTiles8) << f.name << " n=" << n << " k=" << k;
      tv.format = *tf;
      const std::string shape = std::string(f.name) + " n=" + std::to_string(n) + " k=" + std::to_string(k);
      {  // byte b of row o at (o / 8) 8 rb + (b / 64) 512 + (o % 8) 64 + b % 64
        std::vector<uint8_t> got;
        tcodes.from_device(&got, shape);
        const int64_t rb = f.kind == quant::CodeKind::kQ4 ? k / 2 : k;
        int64_t wrong = 0;
        for (int64_t o = 0; o < n; ++o)
          for (int64_t b = 0; b < rb; ++b)
            wrong += got[static_cast<size_t>((o / 8) * 8 * rb + (b / 64) * 512 + (o % 8) * 64 + b % 64)] !=
                     dw->w.q[static_cast<size_t>(o * rb + b)];
        ASSERT_EQ(wrong, 0) << shape << ": bytes away from the layout's place";
      }
      // Runs `run` on the row-major and on the tiled weight (y from y0 each time): the same bytes,
      // close to `want` on `mask`.
      auto same = [&](const std::string& what, int64_t m, int64_t ld, const std::vector<uint8_t>& y0,
                      const std::vector<uint8_t>& want, const std::vector<bool>& mask,
                      const std::function<void(const ops::WeightView&, void* y)>& run, bool bits = true) {
        std::vector<uint8_t> got[2];
        for (int t = 0; t < 2; ++t) {
          Tensor y(DType::kBF16, m * ld);
          y.host = y0;
          y.to_device();
          run(t ? tv : rv, y.dev);
          ASSERT_EQ(cudaStreamSynchronize(backend()->stream()), cudaSuccess) << what;
          y.from_device(&got[t], what);
          if (t) expect_close(y, want, 2e-2f, what + " (tiled)", mask);
        }
        if (bits) {
          EXPECT_TRUE(got[0] == got[1]) << what << ": the tiled codes give other bits than the row-major ones";
        }
      };
      for (int64_t m : {1, 3, 8, 9, 16, 33, 64, 100}) {
        const bool bias = variant % 2 == 0, accumulate = variant % 3 == 1;
        ++variant;
        CaseInputs in(*dw, m, bias, accumulate, rng);
        const int64_t ld_x = in.ld_x, ld_y = in.ld_y;
        std::vector<bool> mask(static_cast<size_t>(m * ld_y));
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) mask[static_cast<size_t>(i * ld_y + j)] = true;
        auto params = [&](const ops::WeightView& w, void* y) {
          return ops::MatmulParams{in.x.dev, DType::kBF16, ld_x, w, bias ? in.b.dev : nullptr, DType::kBF16, y,
                                   DType::kBF16, ld_y, m, n, k, accumulate};
        };
        const std::string tag = shape + " m=" + std::to_string(m) + (bias ? " bias" : "") + (accumulate ? " accumulate" : "");
        // The correctness kernel.
        same("ref " + tag, m, ld_y, in.y0.host, in.want, mask, [&](const ops::WeightView& w, void* y) {
          ASSERT_EQ(launch_matmul_quant(params(w, y), backend()->stream()), cudaSuccess);
        });
        if (m <= 8) {
          for (QuantGemvKernel kn : {QuantGemvKernel::kTile, QuantGemvKernel::kLean, QuantGemvKernel::kBulk})
            for (int u : {0, 1, 4, -3, -5}) {  // u < 0: the shared-memory ring of -u quads a warp
              if (kn != QuantGemvKernel::kLean && u) continue;
              set_quant_gemv_kernel(kn);
              set_quant_gemv_tuning(u > 0 ? u : -1, -1);
              set_quant_gemv_ring(u < 0 ? -u : 0);
              const std::string what = std::string(kn == QuantGemvKernel::kTile ? "tile" : kn == QuantGemvKernel::kLean ? "lean" : "bulk") +
                                       (u < 0 ? " ring " + std::to_string(-u) : " u" + std::to_string(u)) + " " + tag;
              same(what, m, ld_y, in.y0.host, in.want, mask, [&](const ops::WeightView& w, void* y) {
                const ops::MatmulParams p = params(w, y);
                if (w.format.layout == ops::WeightLayout::kOutInTiles8) {
                  ASSERT_FALSE(quant_gemv_bulk_ok(p)) << what;
                }
                ASSERT_EQ(launch_quant_gemv(p, backend()->stream()), cudaSuccess) << what;
              }, kn != QuantGemvKernel::kBulk);  // bulk on the row-major codes, the lean GEMV on the tiled ones
              if (kn == QuantGemvKernel::kBulk || accumulate) continue;
              // The silu epilogue: out[t][c] = silu(gate) * up over rows c and n / 2 + c.
              const int64_t half = n / 2, ld_out = half + 5;
              Tensor out0(DType::kBF16, m * ld_out);
              out0.fill_uniform(rng, -1, 1);
              std::vector<uint8_t> want_out = out0.host;
              std::vector<bool> omask(static_cast<size_t>(m * ld_out));
              for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < half; ++j) {
                  omask[static_cast<size_t>(i * ld_out + j)] = true;
                  const float g = ops::ref::load(DType::kBF16, in.want.data(), i * ld_y + j);
                  const float up = ops::ref::load(DType::kBF16, in.want.data(), i * ld_y + half + j);
                  ops::ref::store(DType::kBF16, want_out.data(), i * ld_out + j, g / (1.f + std::exp(-g)) * up);
                }
              Tensor yy(DType::kBF16, m * ld_y);
              same(what + " silu", m, ld_out, out0.host, want_out, omask, [&](const ops::WeightView& w, void* out) {
                const SiluMulOut so{.out = out, .ld_out = ld_out};
                ASSERT_EQ(launch_quant_gemv(params(w, yy.dev), backend()->stream(), &so), cudaSuccess) << what;
              });
            }
          set_quant_gemv_kernel(QuantGemvKernel::kDefault);
          set_quant_gemv_tuning(-1, -1);
          set_quant_gemv_ring(-1);
        } else if (m <= 64) {
          // The slab GEMM; with the pipelined or one-quad GEMM configured, the tiled weight still runs the slab one.
          for (QuantGemmKernel kn : {QuantGemmKernel::kSlab, QuantGemmKernel::kPipe, QuantGemmKernel::kQuad}) {
            set_quant_gemm_kernel(kn);
            std::vector<uint8_t> got[2];
            for (int t = 0; t < 2; ++t) {
              const ops::WeightView& w = t ? tv : rv;
              if (kn != QuantGemmKernel::kSlab && t == 0) set_quant_gemm_kernel(QuantGemmKernel::kSlab);  // the same kernel on both
              Tensor y(DType::kBF16, m * ld_y);
              y.host = in.y0.host;
              y.to_device();
              const ops::MatmulParams p = params(w, y.dev);
              const int splits = quant_gemm_splits(p, backend()->n_sms());
              const size_t bytes = quant_gemm_scratch_bytes(p, splits);
              void* partials = bytes ? backend()->alloc(bytes).value() : nullptr;
              ASSERT_EQ(launch_quant_gemm(p, splits, partials, backend()->stream()), cudaSuccess) << tag;
              ASSERT_EQ(cudaStreamSynchronize(backend()->stream()), cudaSuccess);
              if (partials) backend()->free(partials);
              y.from_device(&got[t], tag);
              expect_close(y, in.want, 2e-2f, "GEMM " + tag, mask);
              set_quant_gemm_kernel(kn);
            }
            EXPECT_TRUE(got[0] == got[1]) << "GEMM " << static_cast<int>(kn) << " " << tag << ": tiled bits differ";
          }
          set_quant_gemm_kernel(QuantGemmKernel::kDefault);
        } else {
          // Dequantized + cuBLASLt (whole, and 128-row slices), and the GEMV in passes (no slice fits).
          for (size_t cap : {size_t{1} << 30, static_cast<size_t>(k) * 2 * 128, size_t{1}}) {
            backend()->set_dequant_scratch_max(cap);
            same("matmul scratch " + std::to_string(cap) + " " + tag, m, ld_y, in.y0.host, in.want, mask,
                 [&](const ops::WeightView& w, void* y) {
                   const Status st = backend()->matmul(params(w, y));
                   ASSERT_TRUE(st.is_ok()) << st.to_string();
                 });
          }
          backend()->set_dequant_scratch_max(size_t{512} << 20);
        }
      }
    }
  // What the layout does not fit stays row-major, and so does everything with tiles turned off.
  for (auto [kind, n, k] : {std::tuple{quant::CodeKind::kQ4, int64_t{300}, int64_t{1408}},
                            std::tuple{quant::CodeKind::kQ4, int64_t{296}, int64_t{1416}},
                            std::tuple{quant::CodeKind::kQ8, int64_t{296}, int64_t{1416}},
                            std::tuple{quant::CodeKind::kF8, int64_t{296}, int64_t{1408}}}) {
    const std::unique_ptr<DeviceWeight> dw = device_weight({"other", kind, 128, 1, false}, n, k, rng);
    ASSERT_NE(dw, nullptr);
    Result<ops::WeightFormat> f = backend()->prepare_weight(dw->view, n, k);
    ASSERT_TRUE(f.is_ok());
    EXPECT_TRUE(*f == dw->view.format) << "n=" << n << " k=" << k;
  }
  const std::unique_ptr<DeviceWeight> dw = device_weight(formats[0], 296, 1408, rng);
  backend()->set_quant_tiles(false);
  Result<ops::WeightFormat> off = backend()->prepare_weight(dw->view, 296, 1408);
  backend()->set_quant_tiles(true);
  ASSERT_TRUE(off.is_ok());
  EXPECT_EQ(off->layout, ops::WeightLayout::kOutIn);
}

}  // namespace
}  // namespace frugal::cuda::testing
