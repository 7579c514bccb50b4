// cuda_kernel_bench --quant: the weight-only quantized GEMV (quant_gemv.cu) on the
// DeepSeek-R1-Distill-Qwen-7B linear shapes in the dummy-weight formats (int4 g128 with zero
// points, int8 per channel, fp8 128x128 blocks), GB/s against the measured copy ceiling, each
// checked first against the per-element correctness kernel on the same weights; the GEMMs for
// 9..64 tokens (the pipelined one, quant_gemm_pipe.cu, and the first, one-quad one) checked the
// same way at m 9 / 16 / 33 / 64 in every block shape, split and unsplit (also on an odd shape),
// and timed at m 9 / 16 / 32 / 64 next to the GEMV's rows; and the large-m path (dequantize to
// bf16 + cuBLASLt) at m = 2048.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "backend/cuda/kernels.h"
#include "cuda_bench.h"

namespace frugal::cuda::bench {
namespace {

struct QShape {
  const char* name;
  int64_t n, k;
  bool odd = false;  // checked only, not timed: a partial row block and a partial last quad
};
constexpr QShape kQShapes[] = {{"q 3584x3584", 3584, 3584},       {"k 512x3584", 512, 3584},
                               {"gate 18944x3584", 18944, 3584}, {"down 3584x18944", 3584, 18944},
                               {"odd 1000x1416", 1000, 1416, true}};

struct QFmt {
  const char* name;
  ops::WeightFormat (*make)(int64_t k);
};
const QFmt kQFmts[] = {
    {"int4g128", [](int64_t k) { return ops::quant_format(ops::WeightScheme::kInt4, k, 128, true, 1); }},
    {"int8", [](int64_t k) { return ops::quant_format(ops::WeightScheme::kInt8, k, 0, false, 1); }},
    {"fp8b128", [](int64_t k) { return ops::quant_format(ops::WeightScheme::kFp8, k, 128, false, 128); }},
};

std::vector<float> download_bf16(CudaBackend* b, const void* d, int64_t n) {
  std::vector<uint16_t> h(static_cast<size_t>(n));
  (void)b->download(h.data(), d, h.size() * 2);
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) {
    uint32_t u = static_cast<uint32_t>(h[i]) << 16;
    std::memcpy(&f[i], &u, 4);
  }
  return f;
}

}  // namespace

void bench_quant(CudaBackend* b, double ceiling, Table* table) {
  std::mt19937 rng(5);
  // FRUGAL_QBENCH_ONLY=substring: only the format x shape tags that contain it ("int4g128 gate").
  const char* only = std::getenv("FRUGAL_QBENCH_ONLY");
  for (const QFmt& fm : kQFmts) {
    for (const QShape& s : kQShapes) {
      if (only && (std::string(fm.name) + " " + s.name).find(only) == std::string::npos) continue;
      const ops::WeightFormat f = fm.make(s.k);
      const int64_t row_bytes = ops::weight_row_bytes(f, s.k), code_bytes = s.n * row_bytes;
      const int64_t n_scales = ops::weight_scale_rows(f, s.n) * ops::weight_groups_k(f, s.k);
      const int64_t n_zeros = f.zero == ops::ZeroPoint::kOffset ? s.n * ops::weight_groups_k(f, s.k) : 0;
      const int copies = s.odd ? 1 : static_cast<int>(std::max<int64_t>(2, (int64_t{768} << 20) / code_bytes));
      std::vector<void*> codes;
      std::vector<uint8_t> h(static_cast<size_t>(code_bytes));  // copy 0's codes (the tile-major rows re-lay them)
      // Copy 0 from the host (no fp8 NaN patterns: it is the one checked); the rest random on the device.
      {
        for (auto& c : h) {
          c = static_cast<uint8_t>(rng());
          if ((c & 0x7f) == 0x7f) c ^= 1;
        }
        void* d = b->alloc(h.size()).value();
        (void)b->upload(d, h.data(), h.size());
        codes.push_back(d);
      }
      for (int c = 1; c < copies; ++c) codes.push_back(random_buffer(b, DType::kBF16, code_bytes / 2, 200 + c, 0.01f, 0.02f));
      void* scales = random_buffer(b, DType::kF32, n_scales, 9, 0.001f, 0.002f);
      void* zeros = n_zeros ? random_buffer(b, DType::kF32, n_zeros, 10, -0.01f, 0.01f) : nullptr;
      const int64_t max_m = 2048;
      void* x = random_buffer(b, DType::kBF16, max_m * s.k, 7);
      void* y = b->alloc(static_cast<size_t>(max_m * s.n * 2)).value();
      void* y_ref = b->alloc(static_cast<size_t>(64 * s.n * 2)).value();  // checks up to m = 64
      ops::WeightView w;
      w.data = codes[0];
      w.format = f;
      w.scales = scales;
      w.zeros = zeros;
      const std::string tag = std::string(fm.name) + " " + s.name;
      // Check: the fast GEMV against the correctness kernel on the same weights.
      // Runs `launch` (the fast kernel into y) and the correctness kernel (into y_ref) at m tokens
      // and prints the largest difference relative to the largest reference output.
      auto check = [&](const std::string& label, int64_t m, const std::function<void(const ops::MatmulParams&)>& launch) {
        ops::MatmulParams p{x, DType::kBF16, s.k, w, nullptr, DType::kBF16, y, DType::kBF16, s.n, m, s.n, s.k, false};
        ops::MatmulParams r = p;
        r.y = y_ref;
        launch(p);
        (void)launch_matmul_quant(r, b->stream());
        if (cudaStreamSynchronize(b->stream()) != cudaSuccess) {
          std::printf("CHECK %s %s: CUDA error %s\n", tag.c_str(), label.c_str(), cudaGetErrorString(cudaGetLastError()));
          std::abort();
        }
        const auto got = download_bf16(b, y, m * s.n), want = download_bf16(b, y_ref, m * s.n);
        double worst = 0, scale = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
          const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
          worst = std::isnan(d) ? 1e30 : std::max(worst, d);
        }
        const double rel = worst / (scale > 0 ? scale : 1);
        std::printf("CHECK %s %s: max |fast - ref| / max |ref| = %.3g %s\n", tag.c_str(), label.c_str(), rel,
                    rel < 2e-2 ? "ok" : "FAIL");
      };
      {
        ops::MatmulParams p{x, DType::kBF16, s.k, w, nullptr, DType::kBF16, y, DType::kBF16, s.n, 1, s.n, s.k, false};
        if (!quant_gemv_supported(p)) {  // every format of kQFmts is one it takes
          std::printf("CHECK %s: quant_gemv does not take this format\n", tag.c_str());
          std::abort();
        }
      }
      struct CheckCase { int64_t m; int u; };  // u: quads per warp iteration (0: the default rule)
      for (CheckCase c : {CheckCase{1, 0}, CheckCase{1, 1}, CheckCase{1, 4}, CheckCase{8, 0}, CheckCase{33, 0}, CheckCase{64, 0}}) {
        set_quant_gemv_tuning(c.u, 0);
        check("m=" + std::to_string(c.m) + " u=" + std::to_string(c.u), c.m,
              [&](const ops::MatmulParams& p) { (void)launch_quant_gemv(p, b->stream()); });
      }
      set_quant_gemv_tuning(-1, -1);
      // The lean GEMV in the tile kernel's shapes, on its registers (ring 0; the default rows
      // above run whatever quant_gemv_ring_depth picks, the ring rows below ask for theirs).
      set_quant_gemv_kernel(QuantGemvKernel::kLean);
      set_quant_gemv_ring(0);
      for (CheckCase c : {CheckCase{1, 0}, CheckCase{1, 1}, CheckCase{1, 2}, CheckCase{1, 4}, CheckCase{3, 0}, CheckCase{8, 0}}) {
        set_quant_gemv_tuning(c.u, 0);
        check("lean m=" + std::to_string(c.m) + " u=" + std::to_string(c.u), c.m,
              [&](const ops::MatmulParams& p) { (void)launch_quant_gemv(p, b->stream()); });
      }
      for (int64_t m : {1, 8}) {  // with its L2 request (whole rows)
        set_quant_gemv_l2(1 << 20);
        check("lean m=" + std::to_string(m) + " L2 rows", m, [&](const ops::MatmulParams& p) { (void)launch_quant_gemv(p, b->stream()); });
      }
      set_quant_gemv_l2(-1);
      for (int ring : {3, 5})  // the shared-memory ring (set_quant_gemv_ring)
        for (int64_t m : {1, 3, 8}) {
          set_quant_gemv_ring(ring);
          check("lean m=" + std::to_string(m) + " ring " + std::to_string(ring), m,
                [&](const ops::MatmulParams& p) { (void)launch_quant_gemv(p, b->stream()); });
        }
      set_quant_gemv_ring(-1);
      set_quant_gemv_kernel(QuantGemvKernel::kDefault);
      set_quant_gemv_tuning(-1, -1);
      // The bulk GEMV (sm_90) in its default shape and others (consumer warps, stages).
      struct BulkCase { int64_t m; int w, stages; };
      for (BulkCase c : {BulkCase{1, 0, 0}, BulkCase{8, 0, 0}, BulkCase{1, 4, 2}, BulkCase{1, 8, 6}, BulkCase{3, 8, 1}}) {
        set_quant_gemv_kernel(QuantGemvKernel::kBulk);
        set_quant_gemv_bulk_tuning(c.w, c.stages, 0);
        check("bulk m=" + std::to_string(c.m) + " w" + std::to_string(c.w) + " s" + std::to_string(c.stages), c.m,
              [&](const ops::MatmulParams& p) { (void)launch_quant_gemv(p, b->stream()); });
      }
      set_quant_gemv_kernel(QuantGemvKernel::kDefault);
      set_quant_gemv_bulk_tuning(0, 0, 0);
      // The GEMMs (m >= 9), both kernels, against the same oracle, in each block shape, split as
      // the backend splits them (and in one split).
      size_t part_bytes = 0;
      void* partials = nullptr;
      auto run_gemm = [&](const ops::MatmulParams& p, bool split) {
        const int splits = split ? quant_gemm_splits(p, b->n_sms()) : 1;
        if (const size_t need = quant_gemm_scratch_bytes(p, splits); need > part_bytes) {
          (void)cudaStreamSynchronize(b->stream());
          if (partials) b->free(partials);
          partials = b->alloc(need).value();
          part_bytes = need;
        }
        (void)launch_quant_gemm(p, splits, partials, b->stream());
      };
      struct GemmTune { int w, r; const char* name; };
      struct GemmKernel { QuantGemmKernel kernel; const char* name; std::vector<GemmTune> tunes; int chains = 1; int wg = 0; };
      const GemmKernel gemm_kernels[] = {
          {QuantGemmKernel::kPipe, "pipe", {{0, 0, ""}, {8, 1, " w8r1"}, {8, 2, " w8r2"}}},
          {QuantGemmKernel::kQuad, "quad", {{0, 0, ""}, {4, 1, " w4r1"}, {8, 1, " w8r1"}, {4, 2, " w4r2"}}},
          // slab: (quads in flight, row tiles a warp): (2, 1) / (4, 1) up to 16 tokens, (1, 2) / (2, 1) above
          {QuantGemmKernel::kSlab, "slab", {{0, 0, ""}, {4, 1, " u4r1"}, {2, 1, " u2r1"}}},
          // the slab GEMM with two mma chains a token tile (the default; "slab" is FRUGAL_QSLAB_CHAINS=1)
          {QuantGemmKernel::kSlab, "slab2ch", {{0, 0, ""}}, 2},
          // the warpgroup kernel (int4 from 9 tokens here; the default from 12)
          {QuantGemmKernel::kSlab, "slabwg", {{0, 0, ""}}, 2, 1}};
      for (const GemmKernel& gk : gemm_kernels) {
        set_quant_gemm_kernel(gk.kernel);
        set_quant_slab_chains(gk.chains);
        set_quant_slab_wg(gk.wg, 9);
        for (int64_t m : {4, 9, 16, 33, 47, 64}) {
          if (m < 9 && gk.kernel != QuantGemmKernel::kSlab) continue;  // the others start at 9 tokens
          for (const GemmTune& t : gk.tunes) {
            for (bool split : {true, false}) {
              if (!split && t.w != 0 && !s.odd) continue;
              set_quant_gemm_tuning(t.w, t.r);
              check(std::string("gemm-") + gk.name + t.name + " m=" + std::to_string(m) + (split ? " split" : " one split"), m,
                    [&](const ops::MatmulParams& p) { run_gemm(p, split); });
            }
          }
        }
        if (s.odd) continue;  // checked, not timed
        // 12, 40, 48: where the warpgroup kernel's passes meet mma.sync (its default starts at 12)
        for (int64_t m : {1, 4, 8, 9, 12, 16, 32, 40, 48, 64}) {
          if (m < 9 && gk.kernel != QuantGemmKernel::kSlab) continue;  // against the GEMV rows below
          for (const GemmTune& t : gk.tunes) {
            set_quant_gemm_tuning(t.w, t.r);
            ops::MatmulParams p{x, DType::kBF16, s.k, w, nullptr, DType::kBF16, y, DType::kBF16, s.n, m, s.n, s.k, false};
            run_gemm(p, true);  // grows the partials outside the timed loop
            Timing tm = time_op(b->stream(), 30, 10, [&](int i) {
              p.w.data = codes[static_cast<size_t>(i % copies)];
              run_gemm(p, true);
            });
            const double bytes = static_cast<double>(code_bytes) + 4.0 * (n_scales + n_zeros) + 2.0 * m * (s.k + s.n);
            const double gbs = bytes / (tm.median_us * 1e3);
            table->add({"qgemm-" + std::string(gk.name) + " m=" + std::to_string(m) + " " + tag + t.name + " ks" +
                            std::to_string(quant_gemm_splits(p, b->n_sms())),
                        tm, gbs, "GB/s", 100 * gbs / ceiling});
          }
        }
      }
      set_quant_gemm_kernel(QuantGemmKernel::kDefault);
      set_quant_gemm_tuning(0, 0);
      set_quant_slab_chains(0);
      set_quant_slab_wg(-1, 0);
      (void)cudaStreamSynchronize(b->stream());
      if (partials) b->free(partials);
      auto free_shape = [&] {
        for (void* c : codes) b->free(c);
        b->free(scales);
        if (zeros) b->free(zeros);
        b->free(x);
        b->free(y);
        b->free(y_ref);
      };
      if (s.odd) {  // checked only
        free_shape();
        continue;
      }
      // One GEMV row of the table: launch_quant_gemv at m tokens as the knobs now stand, over the
      // rotating copies of the codes.
      auto time_gemv = [&](int64_t m, const std::string& name) {
        ops::MatmulParams p{x, DType::kBF16, s.k, w, nullptr, DType::kBF16, y, DType::kBF16, s.n, m, s.n, s.k, false};
        Timing tm = time_op(b->stream(), 30, 10, [&](int i) {
          p.w.data = codes[static_cast<size_t>(i % copies)];
          (void)launch_quant_gemv(p, b->stream());
        });
        const double bytes = static_cast<double>(code_bytes) + 4.0 * (n_scales + n_zeros) + 2.0 * m * (s.k + s.n);
        const double gbs = bytes / (tm.median_us * 1e3);
        table->add({name, tm, gbs, "GB/s", 100 * gbs / ceiling});
      };
      // The tile GEMV (and the GEMMs it hands m >= 9 to) and the lean GEMV (m <= 8) in the same
      // shapes, so the two compare line by line; qgemv-lean* rows on the registers (ring 0), the
      // qgemv-ring* rows through the ring.
      set_quant_gemv_ring(0);
      struct Tune { int u, w; const char* name; };
      for (QuantGemvKernel kern : {QuantGemvKernel::kTile, QuantGemvKernel::kLean}) {
        const bool lean = kern == QuantGemvKernel::kLean;
        set_quant_gemv_kernel(kern);
        for (int64_t m : {1, 2, 4, 8, 16, 32, 64}) {
          if (lean && m > 8) break;
          for (Tune t : {Tune{0, 0, ""}, Tune{1, 4, " u1w4"}, Tune{2, 4, " u2w4"}, Tune{4, 4, " u4w4"}, Tune{1, 8, " u1w8"},
                         Tune{2, 8, " u2w8"}, Tune{4, 8, " u4w8"}}) {
            if (m != 1 && t.u != 0) continue;
            set_quant_gemv_tuning(t.u, t.w);
            time_gemv(m, std::string(lean ? "qgemv-lean" : "qgemv") + " m=" + std::to_string(m) + " " + tag + t.name);
          }
        }
      }
      // The lean GEMV on the codes in kOutInTiles8 (what CudaBackend::prepare_weight makes of int4
      // and int8 weights: each warp load 512 contiguous bytes): checked bit for bit against the
      // lean GEMV on the row-major codes, then timed beside its rows (copy 0 re-laid by the
      // backend's kernel; the other copies are random either way).
      if (ops::tiles8_fits(f, s.n, s.k)) {
        void* tm_codes = b->alloc(h.size()).value();
        (void)b->upload(tm_codes, h.data(), h.size());
        ops::WeightView wt = w;
        wt.data = tm_codes;
        const Result<ops::WeightFormat> tf = b->prepare_weight(wt, s.n, s.k);
        if (!tf.is_ok() || tf->layout != ops::WeightLayout::kOutInTiles8) {
          std::printf("CHECK %s tiles8: prepare_weight did not re-lay the codes\n", tag.c_str());
          std::abort();
        }
        void* y_tm = b->alloc(static_cast<size_t>(8 * s.n * 2)).value();
        // The lean GEMV at m tokens on `pa` (into y) and on `pb` (into y_tm), ring depths ra / rb
        // (set_quant_gemv_ring): how many outputs differ bit for bit.
        auto differing = [&](const std::string& what, int64_t m, bool a_tiled, int ra, int rb) {
          ops::MatmulParams pa{x, DType::kBF16, s.k, w, nullptr, DType::kBF16, y, DType::kBF16, s.n, m, s.n, s.k, false};
          if (a_tiled) {
            pa.w.data = tm_codes;
            pa.w.format = *tf;
          }
          ops::MatmulParams pb = pa;
          pb.w.data = tm_codes;
          pb.w.format = *tf;
          pb.y = y_tm;
          set_quant_gemv_ring(ra);
          const cudaError_t e1 = launch_quant_gemv(pa, b->stream(), nullptr, QuantGemvKernel::kLean);
          set_quant_gemv_ring(rb);
          const cudaError_t e2 = launch_quant_gemv(pb, b->stream(), nullptr, QuantGemvKernel::kLean);
          set_quant_gemv_ring(0);
          if (e1 != cudaSuccess || e2 != cudaSuccess || cudaStreamSynchronize(b->stream()) != cudaSuccess) {
            std::printf("CHECK %s %s m=%lld: CUDA error %s / %s\n", tag.c_str(), what.c_str(), static_cast<long long>(m),
                        cudaGetErrorString(e1), cudaGetErrorString(e2));
            std::abort();
          }
          std::vector<uint16_t> a(static_cast<size_t>(m * s.n)), c(a.size());
          (void)b->download(a.data(), y, a.size() * 2);
          (void)b->download(c.data(), y_tm, c.size() * 2);
          int64_t differ = 0;
          for (size_t i = 0; i < a.size(); ++i) differ += a[i] != c[i];
          return std::make_pair(differ, a.size());
        };
        // One timed row of the lean GEMV on the tiled codes at m tokens, the knobs as they stand.
        auto time_tiled = [&](int64_t m, const std::string& name) {
          ops::MatmulParams p{x, DType::kBF16, s.k, w, nullptr, DType::kBF16, y, DType::kBF16, s.n, m, s.n, s.k, false};
          p.w.format = *tf;
          Timing tm = time_op(b->stream(), 30, 10, [&](int i) {
            p.w.data = i % copies == 0 ? tm_codes : codes[static_cast<size_t>(i % copies)];
            (void)launch_quant_gemv(p, b->stream(), nullptr, QuantGemvKernel::kLean);
          });
          const double bytes = static_cast<double>(code_bytes) + 4.0 * (n_scales + n_zeros) + 2.0 * m * (s.k + s.n);
          const double gbs = bytes / (tm.median_us * 1e3);
          table->add({name, tm, gbs, "GB/s", 100 * gbs / ceiling});
        };
        for (int64_t m : {1, 3, 8}) {
          const auto [differ, total] = differing("tiles8", m, false, 0, 0);
          std::printf("CHECK %s tiles8 m=%lld: %lld of %zu outputs differ from the lean GEMV's bits %s\n", tag.c_str(),
                      static_cast<long long>(m), static_cast<long long>(differ), total, differ == 0 ? "ok" : "FAIL");
        }
        for (int64_t m : {1, 2, 4, 8})
          for (Tune tu : {Tune{0, 0, ""}, Tune{1, 4, " u1w4"}, Tune{2, 4, " u2w4"}, Tune{1, 8, " u1w8"}, Tune{2, 8, " u2w8"}}) {
            if (m != 1 && tu.u != 0) continue;
            set_quant_gemv_tuning(tu.u, tu.w);
            time_tiled(m, "qgemv-lean-tm m=" + std::to_string(m) + " " + tag + tu.name);
          }
        // The ring (set_quant_gemv_ring) on the tiled codes: checked bit for bit against the lean
        // GEMV's registers on them, then timed as the rows above.
        set_quant_gemv_tuning(-1, -1);
        for (int ring : {3, 5}) {
          for (int64_t m : {1, 3, 8}) {
            const auto [differ, total] = differing("tiles8 ring " + std::to_string(ring), m, true, 0, ring);
            std::printf("CHECK %s tiles8 ring %d m=%lld: %lld of %zu outputs differ from the registers' bits %s\n", tag.c_str(),
                        ring, static_cast<long long>(m), static_cast<long long>(differ), total, differ == 0 ? "ok" : "FAIL");
          }
          set_quant_gemv_ring(ring);
          for (int64_t m : {1, 2, 4, 8})
            for (Tune tu : {Tune{0, 0, ""}, Tune{1, 4, " w4"}, Tune{1, 8, " w8"}}) {
              if (m != 1 && tu.u != 0) continue;
              set_quant_gemv_tuning(tu.u, tu.w);
              time_tiled(m, "qgemv-ring" + std::to_string(ring) + "-tm m=" + std::to_string(m) + " " + tag + tu.name);
            }
        }
        set_quant_gemv_ring(0);
        set_quant_gemv_tuning(-1, -1);
        (void)cudaStreamSynchronize(b->stream());
        b->free(tm_codes);
        b->free(y_tm);
      }
      // The ring on the row-major codes (fp8, and int4 / int8 where the tiles do not fit).
      set_quant_gemv_kernel(QuantGemvKernel::kLean);
      for (int ring : {3, 5})
        for (int64_t m : {1, 2, 4, 8})
          for (Tune tu : {Tune{0, 0, ""}, Tune{1, 4, " w4"}, Tune{1, 8, " w8"}}) {
            if (m != 1 && tu.u != 0) continue;
            set_quant_gemv_ring(ring);
            set_quant_gemv_tuning(tu.u, tu.w);
            time_gemv(m, "qgemv-ring" + std::to_string(ring) + " m=" + std::to_string(m) + " " + tag + tu.name);
          }
      set_quant_gemv_ring(0);  // the lean rows below: the registers
      set_quant_gemv_tuning(-1, -1);
      set_quant_gemv_kernel(QuantGemvKernel::kDefault);
      // The GEMV's loads alone (cuda_bench_load.cu): the lean GEMV's tile order against the same
      // bytes read linearly, 4 and 8 warps a block, as many blocks an SM as fit or 7 (the lean int4
      // GEMV's occupancy at 4 warps). Against the qgemv-lean rows: what the layout costs, and what
      // the arithmetic does.
      if (fm.name == std::string("int4g128")) {
        uint32_t* sink = static_cast<uint32_t*>(b->alloc(static_cast<size_t>(s.n / 16 * 8 * 4)).value());
        for (int wq : {4, 8})
          for (int cap : {0, 7})
            for (bool linear : {false, true}) {
              Timing tm = time_op(b->stream(), 30, 10, [&](int i) {
                (void)launch_load_pattern(codes[static_cast<size_t>(i % copies)], s.n, row_bytes, wq, linear, cap, sink,
                                          b->stream());
              });
              const double gbs = static_cast<double>(code_bytes) / (tm.median_us * 1e3);
              table->add({std::string("qload ") + (linear ? "linear" : "tiles") + " w" + std::to_string(wq) +
                              (cap ? " 7/SM " : " ") + tag,
                          tm, gbs, "GB/s", 100 * gbs / ceiling});
            }
        (void)cudaStreamSynchronize(b->stream());
        b->free(sink);
      }
      // The lean GEMV's L2 request (set_quant_gemv_l2): the first 512 / 2048 bytes of each row, or
      // the whole row, against none (the "l2 0" row: the default kernel again, timed beside them).
      set_quant_gemv_kernel(QuantGemvKernel::kLean);
      set_quant_gemv_tuning(-1, -1);
      for (int64_t m : {1, 8})
        for (int l2 : {0, 512, 2048, 1 << 20}) {
          set_quant_gemv_l2(l2);
          time_gemv(m, "qgemv-lean m=" + std::to_string(m) + " " + tag + " l2 " + (l2 == 1 << 20 ? "row" : std::to_string(l2)));
        }
      set_quant_gemv_l2(-1);
      set_quant_gemv_kernel(QuantGemvKernel::kDefault);
      set_quant_gemv_tuning(-1, -1);
      // The bulk GEMV: its default shape at each m, and at m = 1 (consumer warps, stages, blocks an SM).
      struct BulkTune { int w, stages, blocks; const char* name; };
      set_quant_gemv_kernel(QuantGemvKernel::kBulk);
      for (int64_t m : {1, 2, 4, 8}) {
        for (BulkTune t : {BulkTune{0, 0, 0, ""}, BulkTune{4, 2, 0, " w4s2"}, BulkTune{4, 4, 0, " w4s4"},
                           BulkTune{4, 6, 0, " w4s6"}, BulkTune{4, 4, 1, " w4s4b1"}, BulkTune{8, 2, 0, " w8s2"},
                           BulkTune{8, 4, 0, " w8s4"}, BulkTune{8, 6, 0, " w8s6"}}) {
          if (m != 1 && t.w != 0) continue;
          set_quant_gemv_bulk_tuning(t.w, t.stages, t.blocks);
          ops::MatmulParams p{x, DType::kBF16, s.k, w, nullptr, DType::kBF16, y, DType::kBF16, s.n, m, s.n, s.k, false};
          if (!quant_gemv_bulk_ok(p)) break;  // before sm_90
          Timing tm = time_op(b->stream(), 30, 10, [&](int i) {
            p.w.data = codes[static_cast<size_t>(i % copies)];
            (void)launch_quant_gemv(p, b->stream());
          });
          const double bytes = static_cast<double>(code_bytes) + 4.0 * (n_scales + n_zeros) + 2.0 * m * (s.k + s.n);
          const double gbs = bytes / (tm.median_us * 1e3);
          table->add({"qgemv-bulk m=" + std::to_string(m) + " " + tag + t.name, tm, gbs, "GB/s", 100 * gbs / ceiling});
        }
      }
      set_quant_gemv_kernel(QuantGemvKernel::kDefault);
      set_quant_gemv_bulk_tuning(0, 0, 0);
      if (s.n == 18944) {  // with the silu epilogue (the rows' halves as gate and up): against the rows above
        for (int64_t m : {1, 8}) {
          for (QuantGemvKernel kern : {QuantGemvKernel::kTile, QuantGemvKernel::kLean, QuantGemvKernel::kBulk}) {
            set_quant_gemv_kernel(kern);
            ops::MatmulParams p{x, DType::kBF16, s.k, w, nullptr, DType::kBF16, y, DType::kBF16, s.n, m, s.n, s.k, false};
            const SiluMulOut silu{.out = y, .ld_out = s.n / 2};
            const bool bulk = quant_gemv_bulk_ok(p);
            if (kern == QuantGemvKernel::kBulk && !bulk) continue;
            const char* name = bulk ? "qgemv-bulk" : kern == QuantGemvKernel::kLean ? "qgemv-lean" : "qgemv";
            Timing tm = time_op(b->stream(), 30, 10, [&](int i) {
              p.w.data = codes[static_cast<size_t>(i % copies)];
              (void)launch_quant_gemv(p, b->stream(), &silu);
            });
            const double bytes = static_cast<double>(code_bytes) + 4.0 * (n_scales + n_zeros) + 2.0 * m * (s.k + s.n / 2);
            const double gbs = bytes / (tm.median_us * 1e3);
            table->add({std::string(name) + " m=" + std::to_string(m) + " " + tag + " +silu epilogue", tm,
                        gbs, "GB/s", 100 * gbs / ceiling});
          }
        }
        set_quant_gemv_kernel(QuantGemvKernel::kDefault);
      }
      if (s.n == 18944) {  // large m: dequantize + cuBLASLt through the backend
        ops::MatmulParams p{x, DType::kBF16, s.k, w, nullptr, DType::kBF16, y, DType::kBF16, s.n, max_m, s.n, s.k, false};
        Timing tm = time_op(b->stream(), 10, 3, [&](int) { (void)b->matmul(p); });
        const double tflops = 2.0 * max_m * s.n * s.k / (tm.median_us * 1e6);
        table->add({"qgemm m=2048 dequant+lt " + tag, tm, tflops, "TFLOP/s", 100 * tflops / 790.0});
      }
      free_shape();
    }
  }
  set_quant_gemv_ring(-1);
}

}  // namespace frugal::cuda::bench
