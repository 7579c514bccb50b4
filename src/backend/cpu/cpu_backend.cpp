#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/validate.h"
#include "core/cpu_features.h"
#include "ops/reference.h"
#include "ops/weight_format_check.h"

namespace frugal {
namespace cpu {

void unreachable_dtype(const char* kernel, DType t) {
  check_failed(__FILE__, __LINE__, kernel, std::string("cpu kernel reached with dtype ") + dtype_name(t) +
                                               ", which validation should have refused");
}

const KernelTable& best_kernels() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512vl && f.fma && f.f16c) return avx512_kernels();
  if (f.avx2 && f.fma && f.f16c) return avx2_kernels();
  return scalar_kernels();
}

namespace {

// Below this many element operations per thread, splitting costs more than it saves.
constexpr int64_t kMinWorkPerThread = 32 * 1024;

int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kMinWorkPerThread / std::max<int64_t>(1, work_per_item));
}

// Per-thread scratch that lives as long as the pool's threads; grows, never shrinks.
float* thread_scratch(int64_t n_floats) {
  thread_local std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < n_floats) buf.resize(static_cast<size_t>(n_floats));
  return buf.data();
}

class CpuBackend final : public ops::Backend {
 public:
  CpuBackend(ThreadPool* pool, const KernelTable& kernels, const CpuBackendOptions& options)
      : pool_(pool), k_(kernels), qk_(quant_table_for(kernels)), options_(options) {}

  std::string name() const override { return std::string("cpu-") + k_.isa; }
  DType activation_dtype() const override { return DType::kF32; }

  Result<void*> alloc(size_t nbytes) override {
    // aligned_alloc needs a multiple of the alignment; the extra line keeps odd sizes cheap to reason about.
    void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64 + 64);
    if (!p) return resource_exhausted("cpu backend: cannot allocate " + std::to_string(nbytes) + " bytes");
    return p;
  }
  void free(void* ptr) override { std::free(ptr); }
  Status upload(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); return {}; }
  Status download(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); return {}; }
  Status memset_zero(void* dst, size_t n) override { std::memset(dst, 0, n); return {}; }
  Status synchronize() override { return {}; }
  bool weights_in_host_memory() const override { return true; }

  FRUGAL_BACKEND_OP_OVERRIDES
  bool supports_sample() const override { return true; }
  // Rows in parallel, each through the reference (sorting) sampler.
  Status sample(const ops::SampleParams& p) override {
    if (p.n_rows < 0 || p.vocab <= 0 || p.ld_logits < p.vocab)
      return invalid_argument("cpu sample: n_rows " + std::to_string(p.n_rows) + ", vocab " + std::to_string(p.vocab) +
                              ", ld_logits " + std::to_string(p.ld_logits));
    pool_->parallel_for(p.n_rows, 1, [&](int64_t r0, int64_t r1) {
      ops::SampleParams q = p;
      q.logits = static_cast<const char*>(p.logits) + dtype_bytes(p.logits_dtype, r0 * p.ld_logits);
      q.n_rows = static_cast<int32_t>(r1 - r0);
      q.temperature += r0;
      if (q.top_k) q.top_k += r0;
      if (q.top_p) q.top_p += r0;
      q.seeds += r0;
      q.out_ids += r0;
      ops::ref::sample(q);
    });
    return {};
  }

 private:
  // The quant kernels of the dense table's ISA (VNNI where an AVX-512 CPU has it).
  static const QuantKernelTable& quant_table_for(const KernelTable& k) {
    if (std::strcmp(k.isa, "scalar") == 0) return scalar_quant_kernels();
    if (std::strcmp(k.isa, "avx2") == 0) return avx2_quant_kernels();
    if (cpu_features().avx512_vnni) return avx512_vnni_quant_kernels();
    return avx512_quant_kernels();
  }
  Status matmul_quant(const ops::MatmulParams& p);

  ThreadPool* pool_;
  const KernelTable& k_;
  const QuantKernelTable& qk_;
  CpuBackendOptions options_;
};

Status CpuBackend::embedding(const ops::EmbeddingParams& p) {
  FRUGAL_RETURN_IF_ERROR(validate(p));
  const int64_t row_bytes = dtype_bytes(p.table_dtype, p.dim);
  pool_->parallel_for(p.n_tokens, grain_for(p.dim), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t row = p.ids[t] - p.vocab_begin;  // a vocab-parallel shard's row, if it holds the id
      float* out = static_cast<float*>(p.out) + t * p.dim;
      if (row >= 0 && row < p.vocab) k_.to_f32(p.table_dtype, static_cast<const char*>(p.table) + row * row_bytes, out, p.dim);
      else std::fill(out, out + p.dim, 0.0f);
    }
  });
  return {};
}

Status CpuBackend::rms_norm(const ops::RmsNormParams& p) {
  FRUGAL_RETURN_IF_ERROR(validate(p));
  pool_->parallel_for(p.rows, grain_for(p.dim), [&](int64_t r0, int64_t r1) { k_.rms_norm(p, r0, r1); });
  return {};
}

// The kernels of a weight format, chosen once per matmul call: every scheme and dtype is listed,
// and a format without CPU kernels is refused by name (never computed as another format).
Result<MatmulKernels> matmul_kernels(const KernelTable& k, const ops::WeightFormat& f) {
  switch (f.scheme) {
    case ops::WeightScheme::kDense:
      switch (f.dtype) {
        case DType::kF32: return k.dense_f32;
        case DType::kBF16: return k.dense_bf16;
        case DType::kF16: return k.dense_f16;
        case DType::kF8E4M3: case DType::kI8: case DType::kI4: case DType::kI32: case DType::kI64:
        case DType::kU8: case DType::kBool: case DType::kF64:
          break;
      }
      break;
    case ops::WeightScheme::kInt8: case ops::WeightScheme::kInt4: case ops::WeightScheme::kNf4:
    case ops::WeightScheme::kFp8:
      break;  // quant_matmul (CpuBackend::matmul), not a dense kernel pair
  }
  return unsupported(std::string("cpu matmul: no kernels for weight format '") + ops::weight_format_name(f) + "'");
}

// Quantized weights (int8, int4, nf4, fp8): the quant kernels on their kernel view; the bias
// goes in as f32.
Status CpuBackend::matmul_quant(const ops::MatmulParams& p) {
  std::vector<float> bias;
  if (p.bias && p.bias_dtype != DType::kF32) {
    bias.resize(static_cast<size_t>(p.n));
    k_.to_f32(p.bias_dtype, p.bias, bias.data(), p.n);
  }
  const QuantMatmulRequest r{.x = static_cast<const float*>(p.x), .ld_x = p.ld_x, .w = nullptr,
                             .bias = bias.empty() ? static_cast<const float*>(p.bias) : bias.data(),
                             .y = static_cast<float*>(p.y), .ld_y = p.ld_y, .m = p.m, .accumulate = p.accumulate,
                             .exact_activations = options_.exact_quant_activations};
  return quant_matmul_view(*pool_, r, quant::kernel_view(p.w, p.n, p.k), "cpu matmul", qk_);
}

Status CpuBackend::matmul(const ops::MatmulParams& p) {
  FRUGAL_RETURN_IF_ERROR(validate(p));
  if (p.m == 0 || p.n == 0) return {};
  switch (p.w.format.scheme) {
    case ops::WeightScheme::kDense: break;
    case ops::WeightScheme::kInt8: case ops::WeightScheme::kInt4: case ops::WeightScheme::kNf4:
    case ops::WeightScheme::kFp8: return matmul_quant(p);
  }
  FRUGAL_ASSIGN_OR_RETURN(const MatmulKernels mk, matmul_kernels(k_, p.w.format));
  if (mk.gemm && p.m > kGemvMaxTokens) {
    // Prefill: whole packed blocks per thread, so a block is converted and packed only once.
    const int64_t n_blocks = (p.n + kGemmBlockN - 1) / kGemmBlockN;
    pool_->parallel_for(n_blocks, grain_for(p.m * p.k * kGemmBlockN), [&](int64_t b0, int64_t b1) {
      mk.gemm(p, b0 * kGemmBlockN, std::min(b1 * kGemmBlockN, p.n), thread_scratch(kGemmPackFloats));
    });
    return {};
  }
  // Decode: each thread streams its own contiguous slice of weight rows.
  constexpr int64_t kUnit = 8;
  const int64_t n_units = (p.n + kUnit - 1) / kUnit;
  pool_->parallel_for(n_units, grain_for(kUnit * p.k * p.m), [&](int64_t u0, int64_t u1) {
    mk.gemv(p, u0 * kUnit, std::min(u1 * kUnit, p.n));
  });
  return {};
}

Status CpuBackend::rope(const ops::RopeParams& p) {
  FRUGAL_RETURN_IF_ERROR(validate(p));
  if (p.n_tokens == 0 || (!p.q && !p.k) || p.rotary_dim == 0) return {};
  const int64_t per_token = static_cast<int64_t>(p.n_head + p.n_head_kv) * p.rotary_dim;
  pool_->parallel_for(p.n_tokens, grain_for(per_token), [&](int64_t t0, int64_t t1) { k_.rope(p, t0, t1); });
  return {};
}

Status CpuBackend::kv_write(const ops::KvWriteParams& p) {
  FRUGAL_RETURN_IF_ERROR(validate(p));
  const int64_t row = static_cast<int64_t>(p.cache.n_head_kv) * p.cache.head_dim;
  pool_->parallel_for(p.n_tokens, grain_for(2 * row), [&](int64_t t0, int64_t t1) { k_.kv_write(p, t0, t1); });
  return {};
}

Status CpuBackend::attention(const ops::AttentionParams& p) {
  FRUGAL_RETURN_IF_ERROR(validate(p));
  if (p.n_seqs == 0 || p.n_tokens == 0) return {};
  const int group = p.n_head / p.cache.n_head_kv;
  if (group > kAttentionMaxRows)
    return unsupported("attention: n_head / n_head_kv = " + std::to_string(group) + " exceeds " +
                       std::to_string(kAttentionMaxRows) + " on the cpu backend");
  const int tile = std::max(1, kAttentionMaxRows / group);  // query tokens per item
  struct Costed {
    AttentionItem item;
    int64_t cost;  // query rows x keys visited: causal prefill tiles late in a sequence cost more
  };
  std::vector<Costed> items;
  for (int s = 0; s < p.n_seqs; ++s) {
    const int n_q = p.q_start[s + 1] - p.q_start[s];
    for (int g = 0; g < p.cache.n_head_kv; ++g)
      for (int i0 = 0; i0 < n_q; i0 += tile) {
        const int i1 = std::min(n_q, i0 + tile);
        const int64_t keys = p.sliding_window > 0 ? std::min(p.sliding_window + p.sink_tokens, p.ctx_len[s])
                                                  : p.ctx_len[s] - n_q + i1;
        items.push_back({{s, g, i0, i1}, static_cast<int64_t>(i1 - i0) * keys});
      }
  }
  // Largest first, handed out dynamically: keeps threads balanced when costs differ.
  std::stable_sort(items.begin(), items.end(), [](const Costed& a, const Costed& b) { return a.cost > b.cost; });
  const int64_t scratch = attention_scratch_floats(tile * group, p.cache.head_dim);
  std::atomic<size_t> next{0};
  auto run = [&](int) {
    float* buf = thread_scratch(scratch);
    for (size_t i = next++; i < items.size(); i = next++) k_.attention(p, items[i].item, buf);
  };
  if (items.size() == 1) run(0);
  else pool_->run_on_all(run);
  return {};
}

Status CpuBackend::silu_mul(const ops::SiluMulParams& p) {
  FRUGAL_RETURN_IF_ERROR(validate(p));
  if (p.dim == 0) return {};
  pool_->parallel_for(p.n_tokens, grain_for(4 * p.dim), [&](int64_t t0, int64_t t1) { k_.silu_mul(p, t0, t1); });
  return {};
}

Status CpuBackend::gather_rows(const ops::GatherRowsParams& p) {
  FRUGAL_RETURN_IF_ERROR(validate(p));
  if (p.n_rows == 0 || p.dim == 0) return {};
  const int64_t src_row = dtype_bytes(p.x_dtype, p.ld_x);
  pool_->parallel_for(p.n_rows, grain_for(p.dim), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const void* src = static_cast<const char*>(p.x) + p.rows[i] * src_row;
      if (p.out_dtype == DType::kF32) {
        k_.to_f32(p.x_dtype, src, static_cast<float*>(p.out) + i * p.ld_out, p.dim);
        continue;
      }
      // Narrow outputs are rare (host-side selections); element-wise is fine.
      for (int64_t j = 0; j < p.dim; ++j)
        ops::ref::store(p.out_dtype, p.out, i * p.ld_out + j, ops::ref::load(p.x_dtype, src, j));
    }
  });
  return {};
}

// Routing is a few hundred scalar operations per token: the reference, over token ranges.
Status CpuBackend::moe_route(const ops::MoeRouteParams& p) {
  FRUGAL_RETURN_IF_ERROR(validate(p));
  pool_->parallel_for(p.n_tokens, grain_for(int64_t{8} * p.n_experts), [&](int64_t t0, int64_t t1) {
    ops::MoeRouteParams q = p;
    q.logits = p.logits + t0 * p.ld_logits;
    q.n_tokens = t1 - t0;
    q.topk_idx = p.topk_idx + t0 * p.top_k;
    q.topk_weight = p.topk_weight + t0 * p.top_k;
    q.dense_weight = p.dense_weight ? p.dense_weight + t0 * p.n_experts : nullptr;
    ops::ref::moe_route(q);
  });
  return {};
}

Status CpuBackend::scale_rows(const ops::ScaleRowsParams& p) {
  FRUGAL_RETURN_IF_ERROR(validate(p));
  if (p.rows == 0 || p.dim == 0) return {};
  pool_->parallel_for(p.rows, grain_for(p.dim), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float s = p.scale[t * p.ld_scale];
      float* x = static_cast<float*>(p.x) + t * p.ld_x;
      for (int64_t j = 0; j < p.dim; ++j) x[j] *= s;
    }
  });
  return {};
}

// One matmul per batch entry through this backend's matmul kernels.
Status CpuBackend::batched_matmul(const ops::BatchedMatmulParams& p) {
  FRUGAL_RETURN_IF_ERROR(validate(p));
  for (int64_t b = 0; b < p.batch && p.m > 0 && p.n > 0; ++b)
    FRUGAL_RETURN_IF_ERROR(matmul(ops::MatmulParams{
        .x = static_cast<const float*>(p.x) + b * p.stride_x, .x_dtype = DType::kF32, .ld_x = p.ld_x,
        .w = ops::dense_weight(static_cast<const uint8_t*>(p.w) + dtype_bytes(p.w_dtype, b * p.stride_w), p.w_dtype),
        .bias = nullptr, .bias_dtype = DType::kF32, .y = static_cast<float*>(p.y) + b * p.stride_y, .y_dtype = DType::kF32,
        .ld_y = p.ld_y, .m = p.m, .n = p.n, .k = p.k, .accumulate = false}));
  return {};
}

// Tokens grouped by expert (the token permutation): each chosen expert this call holds runs once
// over the rows routed to it, through this backend's matmul (so quantized experts work too), and
// each token sums its top_k outputs in k order; then the shared experts over all tokens, added
// into out by down's accumulating matmul (out rounded twice in f32, ops/params.h).
Status CpuBackend::moe_experts(const ops::MoeExpertsParams& p) {
  FRUGAL_RETURN_IF_ERROR(validate(p));
  if (p.n_tokens == 0) return {};
  const int64_t K = p.top_k, pairs = p.n_tokens * K, H = p.hidden, I = p.inter;
  std::vector<std::vector<int64_t>> by_expert(static_cast<size_t>(p.n_experts));
  for (int64_t i = 0; i < pairs; ++i) {  // ids checked by validate
    const int32_t e = p.topk_idx[i] - p.first_expert;
    if (e >= 0 && e < p.n_experts) by_expert[static_cast<size_t>(e)].push_back(i);  // else another rank's
  }
  // y stays 0 for pairs routed to another rank's experts: they add nothing below.
  std::vector<float> y(static_cast<size_t>(pairs * H)), xe, g, u, ye;
  for (int32_t e = 0; e < p.n_experts; ++e) {
    const auto& rows = by_expert[static_cast<size_t>(e)];
    const int64_t c = static_cast<int64_t>(rows.size());
    if (c == 0) continue;
    xe.resize(static_cast<size_t>(c * H));
    g.resize(static_cast<size_t>(c * I));
    u.resize(static_cast<size_t>(c * I));
    ye.resize(static_cast<size_t>(c * H));
    for (int64_t r = 0; r < c; ++r)
      std::memcpy(xe.data() + r * H, static_cast<const float*>(p.x) + rows[static_cast<size_t>(r)] / K * p.ld_x, sizeof(float) * H);
    auto mm = [&](const ops::WeightView& w, const float* x, int64_t k, float* out, int64_t n) {
      return matmul(ops::MatmulParams{.x = x, .x_dtype = DType::kF32, .ld_x = k, .w = w, .bias = nullptr,
                                      .bias_dtype = DType::kF32, .y = out, .y_dtype = DType::kF32, .ld_y = n,
                                      .m = c, .n = n, .k = k, .accumulate = false});
    };
    FRUGAL_RETURN_IF_ERROR(mm(p.gate[e], xe.data(), H, g.data(), I));
    FRUGAL_RETURN_IF_ERROR(mm(p.up[e], xe.data(), H, u.data(), I));
    FRUGAL_RETURN_IF_ERROR(silu_mul(ops::SiluMulParams{.gate = g.data(), .up = u.data(), .out = g.data(),
                                                       .act_dtype = DType::kF32, .n_tokens = c, .dim = I,
                                                       .ld_gate = I, .ld_up = I, .ld_out = I}));
    FRUGAL_RETURN_IF_ERROR(mm(p.down[e], g.data(), I, ye.data(), H));
    for (int64_t r = 0; r < c; ++r)
      std::memcpy(y.data() + rows[static_cast<size_t>(r)] * H, ye.data() + r * H, sizeof(float) * H);
  }
  pool_->parallel_for(p.n_tokens, grain_for(K * H), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = static_cast<float*>(p.out) + t * p.ld_out;
      for (int64_t i = 0; i < H; ++i) {
        float acc = 0.f;
        for (int64_t k = 0; k < K; ++k) acc += p.topk_weight[t * K + k] * y[static_cast<size_t>((t * K + k) * H + i)];
        o[i] += acc;
      }
    }
  });
  if (!p.has_shared()) return {};
  const int64_t S = p.shared_inter, n = p.n_tokens;
  std::vector<float> sg(static_cast<size_t>(n * S)), su(static_cast<size_t>(n * S));
  auto mm = [&](const ops::WeightView& w, const void* x, int64_t ld_x, int64_t k, float* out, int64_t ld_out, int64_t cols,
                bool accumulate) {
    return matmul(ops::MatmulParams{.x = x, .x_dtype = DType::kF32, .ld_x = ld_x, .w = w, .bias = nullptr,
                                    .bias_dtype = DType::kF32, .y = out, .y_dtype = DType::kF32, .ld_y = ld_out,
                                    .m = n, .n = cols, .k = k, .accumulate = accumulate});
  };
  FRUGAL_RETURN_IF_ERROR(mm(p.shared_gate, p.x, p.ld_x, H, sg.data(), S, S, false));
  FRUGAL_RETURN_IF_ERROR(mm(p.shared_up, p.x, p.ld_x, H, su.data(), S, S, false));
  FRUGAL_RETURN_IF_ERROR(silu_mul(ops::SiluMulParams{.gate = sg.data(), .up = su.data(), .out = sg.data(),
                                                     .act_dtype = DType::kF32, .n_tokens = n, .dim = S, .ld_gate = S,
                                                     .ld_up = S, .ld_out = S}));
  return mm(p.shared_down, sg.data(), S, S, static_cast<float*>(p.out), p.ld_out, H, true);
}

}  // namespace
}  // namespace cpu

std::unique_ptr<ops::Backend> make_cpu_backend(ThreadPool* pool) { return make_cpu_backend(pool, {}); }

std::unique_ptr<ops::Backend> make_cpu_backend(ThreadPool* pool, const CpuBackendOptions& options) {
  return std::make_unique<cpu::CpuBackend>(pool, cpu::best_kernels(), options);
}

}  // namespace frugal
