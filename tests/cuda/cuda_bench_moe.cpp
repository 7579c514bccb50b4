// cuda_kernel_bench rows of the routed experts (moe_experts) at DeepSeek-V2-Lite's shape: 64
// experts of hidden 2048 x moe_intermediate 1408, top-6 of uniformly random distinct experts,
// for a decode step of 16, 64, 256 and 512 sequences (1.5, 6, 24 and 48 rows per expert on
// average). 16: the GEMVs (the default there) against the streaming kernels
// (FRUGAL_MOE_STREAM=all). 64 to 512: the streaming kernels (the default) against the WMMA
// tiles they replace (FRUGAL_MOE_STREAM=0), the mma.sync kernels (FRUGAL_MOE_MMA=1) and the
// streaming kernels with 2 quads a warp an iteration instead of 4 (FRUGAL_MOE_STREAM_U=2). GB/s
// counts the weights of the experts any token chose (each read once at best: from 64 tokens on,
// every expert), against the copy ceiling. Then 8192 tokens (a prefill step, 768 rows per
// expert: compute), the WMMA 64-row tiles (the default there) against the mma.sync kernels
// (FRUGAL_MOE_MMA=all), in TFLOP/s. The time is the whole op (permute, gate_up, down, combine).
// First, batch-1/2 decode (6 and 12 pairs) with V2-Lite's shared experts (2 x 1408 = 2816
// channels) in the op: the tiny path (the default there: two kernels, shared experts fused)
// against the GEMVs with the shared MLP as the backend's ops after the combine (FRUGAL_MOE_TINY=0:
// the model's old sequence of launches), and both without the shared experts. GB/s counts the
// chosen experts' weights (and the shared experts' 34.6 MB where run).
#include <random>

#include "backend/cuda/kernels.h"
#include "cuda_bench.h"

namespace frugal::cuda::bench {

void bench_moe(CudaBackend* b, double ceiling_gbs, Table* table) {
  const int64_t hidden = 2048, inter = 1408, max_tok = 8192;
  const int32_t E = 64, top_k = 6;
  std::vector<void*> owned;
  std::vector<ops::WeightView> views;  // gate[E], up[E], down[E]
  for (int m = 0; m < 3 * E; ++m) {
    owned.push_back(random_buffer(b, DType::kBF16, hidden * inter, 500 + m, -0.05f, 0.05f));
    views.push_back(ops::dense_weight(owned.back(), DType::kBF16));
  }
  auto upload = [&](const void* data, size_t bytes) {
    void* d = b->alloc(bytes).value();
    (void)b->upload(d, data, bytes);
    owned.push_back(d);
    return d;
  };
  const auto* dv = static_cast<const ops::WeightView*>(upload(views.data(), views.size() * sizeof(ops::WeightView)));
  void* x = random_buffer(b, DType::kBF16, max_tok * hidden, 41);
  void* out = random_buffer(b, DType::kBF16, max_tok * hidden, 42);
  const int64_t shared_inter = 2 * inter;
  const int64_t scratch_bytes = ops::moe_experts_scratch_bytes(max_tok, top_k, E, hidden, inter, shared_inter);
  void* scratch = b->alloc(static_cast<size_t>(scratch_bytes)).value();
  owned.insert(owned.end(), {x, out, scratch});
  // The shared experts: gate and up rows back to back [2 S, hidden], down [hidden, S].
  void* shared_gu = random_buffer(b, DType::kBF16, 2 * shared_inter * hidden, 700, -0.05f, 0.05f);
  void* shared_down = random_buffer(b, DType::kBF16, hidden * shared_inter, 701, -0.05f, 0.05f);
  owned.insert(owned.end(), {shared_gu, shared_down});
  std::mt19937 rng(19);
  const MoeMma mma_was = moe_mma();
  const MoeStream stream_was = moe_stream();
  struct Run {
    const char* label;
    MoeStream stream;
    MoeMma mma;
    int stream_u = 0;
  };
  const Run stream_default{"stream", MoeStream::kDecode, MoeMma::kOff}, stream_u2{"stream u=2", MoeStream::kDecode, MoeMma::kOff, 2},
      stream_all{"stream (all)", MoeStream::kAll, MoeMma::kOff},
      gemv{"gemv", MoeStream::kDecode, MoeMma::kOff}, wmma{"wmma (old)", MoeStream::kOff, MoeMma::kOff},
      mma_decode{"mma.sync", MoeStream::kOff, MoeMma::kDecode}, mma_all{"mma.sync", MoeStream::kOff, MoeMma::kAll};
  for (int64_t n : {1, 2, 16, 64, 256, 512, 8192}) {
    std::vector<int32_t> idx(static_cast<size_t>(n * top_k)), perm(static_cast<size_t>(E));
    std::vector<float> wt(idx.size(), 1.0f / top_k);
    std::vector<bool> used(static_cast<size_t>(E));
    for (int64_t t = 0; t < n; ++t) {
      for (int32_t e = 0; e < E; ++e) perm[static_cast<size_t>(e)] = e;
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int32_t k = 0; k < top_k; ++k) {
        idx[static_cast<size_t>(t * top_k + k)] = perm[static_cast<size_t>(k)];
        used[static_cast<size_t>(perm[static_cast<size_t>(k)])] = true;
      }
    }
    int64_t active = 0;
    for (bool u : used) active += u;
    const double bytes = 3.0 * active * hidden * inter * 2;
    ops::MoeExpertsParams p{.x = x, .act_dtype = DType::kBF16, .ld_x = hidden, .out = out, .ld_out = hidden,
                            .n_tokens = n, .hidden = hidden, .inter = inter, .n_experts = E, .top_k = top_k,
                            .topk_idx = static_cast<const int32_t*>(upload(idx.data(), idx.size() * 4)),
                            .topk_weight = static_cast<const float*>(upload(wt.data(), wt.size() * 4)), .gate = dv,
                            .up = dv + E, .down = dv + 2 * E, .format = views[0].format, .scratch = scratch,
                            .scratch_bytes = scratch_bytes};
    if (n <= 2) {
      for (const bool with_shared : {true, false})
        for (const bool tiny : {true, false}) {
          ops::MoeExpertsParams q = p;
          if (with_shared) {
            const auto* gu = static_cast<const uint8_t*>(shared_gu);
            q.shared_inter = shared_inter;
            q.shared_gate = ops::dense_weight(gu, DType::kBF16);
            q.shared_up = ops::dense_weight(gu + shared_inter * hidden * 2, DType::kBF16);
            q.shared_down = ops::dense_weight(shared_down, DType::kBF16);
            q.shared_gate_up = q.shared_gate;
          }
          set_moe_stream(MoeStream::kDecode);
          set_moe_mma(MoeMma::kOff);
          set_moe_tiny_pairs(tiny ? -1 : 0);
          Timing t = time_op(b->stream(), 100, 10, [&](int) { (void)b->moe_experts(q); });
          const std::string name = "moe_experts v2-lite " + std::to_string(n) + " tok top-6 " +
                                   (with_shared ? "+shared " : "") + moe_path_name(moe_experts_path(q)) +
                                   (tiny ? "" : with_shared ? " + shared ops (old)" : " (old)");
          const double moved = bytes + (with_shared ? 3.0 * shared_inter * hidden * 2 : 0.0);
          const double gbs = moved / (t.median_us * 1e3);
          table->add({name, t, gbs, "GB/s", 100 * gbs / ceiling_gbs});
        }
      set_moe_tiny_pairs(-1);
      continue;
    }
    const bool prefill = n > 512;
    const std::vector<Run> runs = n <= 16 ? std::vector<Run>{gemv, stream_all}
                                  : prefill ? std::vector<Run>{wmma, mma_all}
                                            : std::vector<Run>{wmma, mma_decode, stream_default, stream_u2};
    for (const Run& run : runs) {
      set_moe_stream(run.stream);
      set_moe_mma(run.mma);
      set_moe_stream_u(run.stream_u);
      Timing t = time_op(b->stream(), prefill ? 10 : 30, prefill ? 2 : 5, [&](int) { (void)b->moe_experts(p); });
      const std::string name = "moe_experts v2-lite " + std::to_string(n) + " tok top-6 " + run.label;
      if (prefill) {
        const double tflops = 2.0 * n * top_k * 3 * hidden * inter / (t.median_us * 1e6);
        table->add({name, t, tflops, "TFLOP/s", 100 * tflops / 790.0});
      } else {
        const double gbs = bytes / (t.median_us * 1e3);
        table->add({name, t, gbs, "GB/s", 100 * gbs / ceiling_gbs});
      }
    }
  }
  set_moe_mma(mma_was);
  set_moe_stream(stream_was);
  set_moe_stream_u(0);
  for (void* d : owned) b->free(d);
}

}  // namespace frugal::cuda::bench
