// A synthetic DeepSeek-R1-Distill-Qwen-7B forward built from the backend's ops with random
// weights: batch-1 decode captured as one CUDA graph (the engine's decode path) and a
// 2048-token prefill. What the model code will do, minus the host-side scheduling.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/graph.h"
#include "backend/cuda/kernels.h"
#include "cuda_bench.h"

namespace frugal::cuda::bench {
namespace {

constexpr int64_t kHidden = 3584, kInter = 18944, kVocab = 152064;
constexpr int kLayers = 28, kHeads = 28, kKv = 4, kHd = 128, kBlock = 16;
constexpr int64_t kQkv = (kHeads + 2 * kKv) * kHd;  // 4608
constexpr int kMaxTokens = 2048, kCacheBlocks = 160;  // 2560 slots per layer

struct Layer {
  void* w_qkv;   // [4608, 3584]
  void* b_qkv;   // [4608]
  void* w_o;     // [3584, 3584]
  void* w_gu;    // [2 * 18944, 3584] gate rows then up rows
  void* w_down;  // [3584, 18944]
  void* norm1;   // [3584]
  void* norm2;   // [3584]
  void* k_cache; // [160, 16, 4, 128]
  void* v_cache;
};

struct Model {
  std::vector<Layer> layers;
  void *embed, *norm_f, *lm_head;
  // activations, sized for kMaxTokens
  void *res, *h, *qkv, *attn, *mlp_in, *gu, *act, *last, *logits;
  int32_t *ids, *positions, *slots, *q_start, *ctx_len, *table, *out_ids;
  float* inv_freq;
  float* temperature;
  uint64_t* seeds;
};

template <typename T>
T* dev_copy(CudaBackend* b, const std::vector<T>& v) {
  void* d = b->alloc(v.size() * sizeof(T)).value();
  (void)b->upload(d, v.data(), v.size() * sizeof(T));
  return static_cast<T*>(d);
}

Model build(CudaBackend* b) {
  Model m;
  uint64_t seed = 1000;
  const float ws = 0.02f;  // weight scale keeps activations finite through 28 layers
  for (int l = 0; l < kLayers; ++l) {
    Layer L;
    L.w_qkv = random_buffer(b, DType::kBF16, kQkv * kHidden, seed++, -ws, ws);
    L.b_qkv = random_buffer(b, DType::kBF16, kQkv, seed++, -ws, ws);
    L.w_o = random_buffer(b, DType::kBF16, kHidden * kHidden, seed++, -ws, ws);
    L.w_gu = random_buffer(b, DType::kBF16, 2 * kInter * kHidden, seed++, -ws, ws);
    L.w_down = random_buffer(b, DType::kBF16, kHidden * kInter, seed++, -ws, ws);
    L.norm1 = random_buffer(b, DType::kBF16, kHidden, seed++, 0.9f, 1.1f);
    L.norm2 = random_buffer(b, DType::kBF16, kHidden, seed++, 0.9f, 1.1f);
    const int64_t cache = int64_t{kCacheBlocks} * kBlock * kKv * kHd;
    L.k_cache = random_buffer(b, DType::kBF16, cache, seed++);
    L.v_cache = random_buffer(b, DType::kBF16, cache, seed++);
    m.layers.push_back(L);
  }
  m.embed = random_buffer(b, DType::kBF16, kVocab * kHidden, seed++);
  m.norm_f = random_buffer(b, DType::kBF16, kHidden, seed++, 0.9f, 1.1f);
  m.lm_head = random_buffer(b, DType::kBF16, kVocab * kHidden, seed++, -ws, ws);
  auto act = [&](int64_t n) { return b->alloc(static_cast<size_t>(n * 2)).value(); };
  m.res = act(kMaxTokens * kHidden);
  m.h = act(kMaxTokens * kHidden);
  m.qkv = act(kMaxTokens * kQkv);
  m.attn = act(kMaxTokens * kHidden);
  m.mlp_in = act(kMaxTokens * kHidden);
  m.gu = act(kMaxTokens * 2 * kInter);
  m.act = act(kMaxTokens * kInter);
  m.last = act(kHidden);
  m.logits = act(kVocab);
  std::vector<float> inv(kHd / 2);
  for (int i = 0; i < kHd / 2; ++i) inv[static_cast<size_t>(i)] = std::pow(1e6f, -2.f * i / kHd);
  m.inv_freq = dev_copy(b, inv);
  std::vector<int32_t> table(kCacheBlocks);
  for (int i = 0; i < kCacheBlocks; ++i) table[static_cast<size_t>(i)] = i;
  m.table = dev_copy(b, table);
  m.ids = dev_copy(b, std::vector<int32_t>(kMaxTokens, 42));
  m.positions = dev_copy(b, std::vector<int32_t>(kMaxTokens, 0));
  m.slots = dev_copy(b, std::vector<int32_t>(kMaxTokens, 0));
  m.q_start = dev_copy(b, std::vector<int32_t>(2, 0));
  m.ctx_len = dev_copy(b, std::vector<int32_t>(1, 0));
  m.out_ids = dev_copy(b, std::vector<int32_t>(1, 0));
  m.temperature = dev_copy(b, std::vector<float>(1, 0.f));
  m.seeds = dev_copy(b, std::vector<uint64_t>(1, 7));
  return m;
}

// Writes the step's inputs: n new tokens at positions [ctx - n, ctx) of one sequence.
void set_inputs(CudaBackend* b, Model& m, int n, int ctx) {
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = ctx - n + i;
  (void)b->upload(m.positions, pos.data(), pos.size() * 4);
  (void)b->upload(m.slots, pos.data(), pos.size() * 4);  // identity block table: slot = position
  std::vector<int32_t> qs = {0, n}, cl = {ctx};
  (void)b->upload(m.q_start, qs.data(), 8);
  (void)b->upload(m.ctx_len, cl.data(), 4);
}

// One forward step of n tokens (one sequence), ending with greedy sampling of the last token.
Status forward(CudaBackend* b, Model& m, int n, int max_ctx) {
  const DType bf = DType::kBF16;
  FRUGAL_RETURN_IF_ERROR(b->embedding({m.embed, bf, m.ids, m.res, bf, n, kHidden, kVocab}));
  for (int l = 0; l < kLayers; ++l) {
    Layer& L = m.layers[static_cast<size_t>(l)];
    // Layer 0 normalizes the embedding; later layers first add the previous MLP output.
    ops::RmsNormParams n1{l == 0 ? m.res : m.mlp_in, l == 0 ? nullptr : m.res, m.h, L.norm1, bf, bf, n, kHidden, kHidden, kHidden, kHidden, 1e-6f};
    FRUGAL_RETURN_IF_ERROR(b->rms_norm(n1));
    FRUGAL_RETURN_IF_ERROR(b->matmul({m.h, bf, kHidden, ops::dense_weight(L.w_qkv, bf), L.b_qkv, bf, m.qkv, bf, kQkv, n, kQkv, kHidden, false}));
    auto* q = static_cast<uint16_t*>(m.qkv);
    void* k = q + kHeads * kHd;
    void* v = q + (kHeads + kKv) * kHd;
    ops::KvCacheLayer cache{L.k_cache, L.v_cache, bf, kCacheBlocks, kBlock, kKv, kHd};
    FRUGAL_RETURN_IF_ERROR(b->rope_kv_write({{q, k, bf, m.positions, m.inv_freq, n, kQkv, kQkv, kHeads, kKv, kHd, kHd, 1.f},
                                             {cache, k, v, bf, kQkv, kQkv, m.slots, n}}));
    FRUGAL_RETURN_IF_ERROR(b->attention({cache, q, m.attn, bf, kQkv, kHidden, 1, n, m.q_start, m.ctx_len, m.table,
                                         kCacheBlocks, max_ctx, kHeads, 0, 1.f / std::sqrt(float(kHd))}));
    FRUGAL_RETURN_IF_ERROR(b->matmul({m.attn, bf, kHidden, ops::dense_weight(L.w_o, bf), nullptr, bf, m.mlp_in, bf, kHidden, n, kHidden, kHidden, false}));
    FRUGAL_RETURN_IF_ERROR(b->rms_norm({m.mlp_in, m.res, m.h, L.norm2, bf, bf, n, kHidden, kHidden, kHidden, kHidden, 1e-6f}));
    auto* g = static_cast<uint16_t*>(m.gu);
    FRUGAL_RETURN_IF_ERROR(b->matmul_silu_mul(
        {{m.h, bf, kHidden, ops::dense_weight(L.w_gu, bf), nullptr, bf, m.gu, bf, 2 * kInter, n, 2 * kInter, kHidden, false},
         {g, g + kInter, m.act, bf, n, kInter, 2 * kInter, 2 * kInter, kInter}}));
    FRUGAL_RETURN_IF_ERROR(b->matmul({m.act, bf, kInter, ops::dense_weight(L.w_down, bf), nullptr, bf, m.mlp_in, bf, kHidden, n, kHidden, kInter, false}));
  }
  // Only the last token's logits are needed.
  void* last_in = static_cast<uint16_t*>(m.mlp_in) + int64_t{n - 1} * kHidden;
  void* last_res = static_cast<uint16_t*>(m.res) + int64_t{n - 1} * kHidden;
  FRUGAL_RETURN_IF_ERROR(b->rms_norm({last_in, last_res, m.last, m.norm_f, bf, bf, 1, kHidden, kHidden, kHidden, kHidden, 1e-6f}));
  FRUGAL_RETURN_IF_ERROR(b->matmul({m.last, bf, kHidden, ops::dense_weight(m.lm_head, bf), nullptr, bf, m.logits, bf, kVocab, 1, kVocab, kHidden, false}));
  return b->sample({m.logits, bf, kVocab, 1, static_cast<int32_t>(kVocab), m.temperature, nullptr, nullptr, m.seeds, m.out_ids});
}

// Device memory of n random fp8 e4m3 codes (every finite code, no NaN 0x7f / 0xff), filled on
// the host with a xorshift stream.
void* random_fp8(CudaBackend* b, int64_t n, uint64_t seed) {
  std::vector<uint8_t> h(static_cast<size_t>(n));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& c : h) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<uint8_t>(x >> 32);
    if ((c & 0x7f) == 0x7f) c ^= 1;
  }
  void* d = b->alloc(h.size()).value();
  (void)b->upload(d, h.data(), h.size());
  return d;
}

}  // namespace

// One decode-attention batch for the benchmarks: the 7B's 28 query / 4 kv heads of 128, n_seqs
// sequences of ctx keys in 16-slot blocks (scattered block tables), max_ctx_len as given, and as
// many copies of the K / V caches as keep 512 MB in rotation (so the rows come from HBM, not L2).
// Bytes: the K and V rows read (and int8's per-(slot, head) scales).
struct DecodeBatch {
  static constexpr int bs = 16, n_kv = 4, hd = 128, n_head = 28;
  CudaBackend* b;
  ops::AttentionParams p{};
  std::vector<void*> ks, vs, owned;
  int copies = 1;
  double bytes = 0;

  DecodeBatch(CudaBackend* be, DType kv, int n_seqs, int ctx, int max_ctx) : b(be) {
    const bool int8 = kv == DType::kI8;
    const int blocks_per_seq = (max_ctx + bs - 1) / bs, n_blocks = blocks_per_seq * n_seqs;
    const int64_t elems = int64_t{n_blocks} * bs * n_kv * hd;  // per cache
    const int64_t n_scales = int64_t{n_blocks} * bs * n_kv;
    bytes = 2.0 * n_seqs * ctx * n_kv * (hd * dtype_bytes(kv, 1) + (int8 ? 4 : 0));
    copies = static_cast<int>(std::max(1.0, std::min(16.0, 512e6 / (2.0 * elems * dtype_bytes(kv, 1)))));
    for (int c = 0; c < copies; ++c) {
      const uint64_t seed = 200 + 2 * static_cast<uint64_t>(c);
      // int8 codes: any byte; fp8: every finite code (random_fp8); bf16: values in [-1, 1).
      ks.push_back(kv == DType::kBF16 ? random_buffer(b, kv, elems, seed) : random_fp8(b, elems, seed));
      vs.push_back(kv == DType::kBF16 ? random_buffer(b, kv, elems, seed + 1) : random_fp8(b, elems, seed + 1));
    }
    void* k_scales = keep(int8 ? random_buffer(b, DType::kF32, n_scales, 11, 0.5f / 127, 1.5f / 127) : nullptr);
    void* v_scales = keep(int8 ? random_buffer(b, DType::kF32, n_scales, 12, 0.5f / 127, 1.5f / 127) : nullptr);
    void* q = keep(random_buffer(b, DType::kBF16, int64_t{n_seqs} * n_head * hd, 7));
    void* out = keep(b->alloc(static_cast<size_t>(n_seqs) * n_head * hd * 2).value());
    std::vector<int32_t> q_start(1, 0), ctx_len(static_cast<size_t>(n_seqs), ctx), tables(static_cast<size_t>(n_blocks));
    for (int i = 0; i < n_seqs; ++i) q_start.push_back(i + 1);
    for (int i = 0; i < n_blocks; ++i) tables[static_cast<size_t>(i)] = static_cast<int32_t>((int64_t{i} * 7919) % n_blocks);
    p = {{ks[0], vs[0], kv, n_blocks, bs, n_kv, hd, static_cast<float*>(k_scales), static_cast<float*>(v_scales), 1.f / 64,
          1.f / 64},
         q, out, DType::kBF16, int64_t{n_head} * hd, int64_t{n_head} * hd, n_seqs, n_seqs,
         up(q_start), up(ctx_len), up(tables), blocks_per_seq, max_ctx, n_head, 0, 1.f / std::sqrt(float(hd))};
  }
  DecodeBatch(const DecodeBatch&) = delete;
  DecodeBatch& operator=(const DecodeBatch&) = delete;
  ~DecodeBatch() {
    for (auto* list : {&ks, &vs, &owned})
      for (void* d : *list)
        if (d != nullptr) b->free(d);
  }
  // Timing rep i reads copy i % copies.
  void rotate(int i) {
    p.cache.k_cache = ks[static_cast<size_t>(i % copies)];
    p.cache.v_cache = vs[static_cast<size_t>(i % copies)];
  }

 private:
  void* keep(void* d) {
    owned.push_back(d);
    return d;
  }
  const int32_t* up(const std::vector<int32_t>& v) {
    void* d = keep(b->alloc(v.size() * 4).value());
    (void)b->upload(d, v.data(), v.size() * 4);
    return static_cast<const int32_t*>(d);
  }
};

void bench_decode_attention(CudaBackend* b, double ceiling_gbs, Table* table) {
  // Bytes counted: the K and V rows read (and int8's per-(slot, head) scales); queries, outputs
  // and partials are under 1% here. Caches smaller than 512 MB rotate through copies so that L2
  // (50 MB) does not serve them. Each shape runs the tensor-core and CUDA-core kernels as
  // configured (DecodeTuning from the environment, "default") and as before the tuning knobs
  // ("original": 2 stages, separate combine, block-rounded splits) and the tensor-core kernel
  // as configured with the sliced combine ("tensor-core sliced"); the single 32k sequence
  // also sweeps the tensor-core kernel's stages and combine (separate, fused, sliced) and, with
  // the sliced combine, the block-table and K/V L2 prefetches and forced split counts, once with
  // max_ctx_len = ctx and once as a captured graph passes it (the power of two above: 65,536).
  // FRUGAL_DABENCH_ONLY=<text> keeps the rows whose name contains it (e.g. "1x32768", "fp8 1x").
  struct Shape {
    int n_seqs, ctx, max_ctx;
  };
  struct Mode {
    std::string name;
    bool mma;
    DecodeTuning tuning;
  };
  const char* only = std::getenv("FRUGAL_DABENCH_ONLY");
  (void)b->reserve_scratch(64u << 20);
  const bool mma_was = decode_mma_enabled();
  const DecodeTuning tuning_was = decode_tuning();
  DecodeTuning sliced = tuning_was;
  sliced.combine = DecodeTuning::kSliced;
  std::vector<Mode> modes = {{"tensor-core default", true, tuning_was},
                             {"tensor-core original", true, DecodeTuning::original()},
                             {"tensor-core sliced", true, sliced},
                             {"cuda-core default", false, tuning_was},
                             {"cuda-core original", false, DecodeTuning::original()}};
  std::vector<Mode> sweep;
  // Per stage count: the combine (separate, fused, sliced), then the sliced combine with the
  // block-table L1 prefetch, the K/V rows' L2 prefetch and both.
  struct SweepMode {
    const char* name;
    int combine;
    bool table, l2;
  };
  static const SweepMode kSweep[] = {{"separate", DecodeTuning::kSeparate, false, false},
                                     {"fused", DecodeTuning::kFused, false, false},
                                     {"sliced", DecodeTuning::kSliced, false, false},
                                     {"sliced table", DecodeTuning::kSliced, true, false},
                                     {"sliced l2", DecodeTuning::kSliced, false, true},
                                     {"sliced table l2", DecodeTuning::kSliced, true, true}};
  for (int ns = 2; ns <= 4; ++ns)
    for (const SweepMode& sm : kSweep) {
      DecodeTuning t;
      t.mma_stages = ns;
      t.combine = sm.combine;
      t.table_prefetch = sm.table;
      t.l2_prefetch = sm.l2;
      sweep.push_back({"tc " + std::to_string(ns) + " stages " + sm.name, true, t});
    }
  // The sliced combine merges more splits for little more: 3 stages at forced split counts
  // (132: two waves of resident blocks, the second starting as the first drains).
  for (int n : {33, 99, 132, 198}) {
    DecodeTuning t;
    t.mma_stages = 3;
    t.combine = DecodeTuning::kSliced;
    t.splits = n;
    sweep.push_back({"tc 3 stages sliced forced " + std::to_string(n), true, t});
  }
  for (DType kv : {DType::kBF16, DType::kF8E4M3, DType::kI8}) {
    const bool int8 = kv == DType::kI8;
    for (Shape sh : {Shape{1, 256, 256}, Shape{1, 32768, 32768}, Shape{1, 32768, 65536}, Shape{32, 2048, 2048},
                     Shape{256, 1024, 1024}}) {
      const bool long_one = sh.n_seqs == 1 && sh.ctx == 32768;
      const std::string shape_name = std::string(kv == DType::kBF16 ? "bf16 " : int8 ? "int8 " : "fp8 ") +
                                     std::to_string(sh.n_seqs) + "x" + std::to_string(sh.ctx) +
                                     (sh.max_ctx != sh.ctx ? " (max_ctx " + std::to_string(sh.max_ctx) + ")" : "");
      std::vector<Mode> run;
      for (const auto& list : {modes, long_one ? sweep : std::vector<Mode>{}})
        for (const Mode& m : list)
          if (only == nullptr || ("decode attn " + shape_name + " " + m.name).find(only) != std::string::npos) run.push_back(m);
      if (run.empty()) continue;
      DecodeBatch d(b, kv, sh.n_seqs, sh.ctx, sh.max_ctx);
      for (const Mode& m : run) {
        set_decode_mma_enabled(m.mma);
        set_decode_tuning(m.tuning);
        const int splits = attention_decode_splits(d.p, b->n_sms());
        Timing t = time_op(b->stream(), 30, 10, [&](int i) {
          d.rotate(i);
          (void)b->attention(d.p);
        });
        const double gbs = d.bytes / (t.median_us * 1e3);
        table->add({"decode attn " + shape_name + " " + m.name + " (" + std::to_string(splits) + " splits)", t, gbs,
                    "GB/s", 100 * gbs / ceiling_gbs});
      }
    }
  }
  set_decode_mma_enabled(mma_was);
  set_decode_tuning(tuning_was);
}

void bench_decode_splits(CudaBackend* b, double ceiling_gbs, Table* table) {
  // The split count against the batch: 7B geometry (28 heads, 4 kv heads, 128 wide, bf16 KV),
  // n sequences of ctx keys with max_ctx_len as a captured graph passes it (the power of two at
  // or above ctx), the tensor-core kernel with the default combine at forced split counts, the
  // default rule and the wave rule (whole_units 0). Attention and its combine are timed together
  // (what a step pays); caches rotate through copies so the rows come from HBM.
  struct Shape {
    int n_seqs, ctx, max_ctx;
  };
  (void)b->reserve_scratch(64u << 20);
  const bool mma_was = decode_mma_enabled();
  const DecodeTuning was = decode_tuning();
  set_decode_mma_enabled(true);
  for (Shape sh : {Shape{1, 256, 256}, Shape{1, 2048, 2048}, Shape{4, 512, 1024}, Shape{8, 512, 1024}, Shape{16, 512, 1024},
                   Shape{32, 512, 1024}, Shape{64, 512, 1024}, Shape{8, 2048, 2048}, Shape{16, 2048, 2048},
                   Shape{64, 2048, 2048}, Shape{256, 640, 1024}}) {
    DecodeBatch d(b, DType::kBF16, sh.n_seqs, sh.ctx, sh.max_ctx);
    const std::string shape = std::to_string(sh.n_seqs) + "x" + std::to_string(sh.ctx) + " (max_ctx " + std::to_string(sh.max_ctx) + ")";
    struct Mode {
      std::string name;
      int splits, whole;
    };
    std::vector<Mode> modes = {{"default", 0, -1}, {"wave rule", 0, 0}};
    for (int n : {1, 2, 3, 4, 8, 16, 32}) modes.push_back({"forced " + std::to_string(n), n, -1});
    for (const Mode& m : modes) {
      DecodeTuning t = was;
      t.splits = m.splits;
      t.whole_units = m.whole;
      set_decode_tuning(t);
      const int splits = attention_decode_splits(d.p, b->n_sms());
      if (m.splits > 0 && splits != m.splits) continue;  // capped by the context
      Timing tm = time_op(b->stream(), 30, 10, [&](int i) {
        d.rotate(i);
        (void)b->attention(d.p);
      });
      const double gbs = d.bytes / (tm.median_us * 1e3);
      table->add({"decode splits " + shape + " " + m.name + " (" + std::to_string(splits) + " splits)", tm, gbs, "GB/s",
                  100 * gbs / ceiling_gbs});
    }
  }
  set_decode_tuning(was);
  set_decode_mma_enabled(mma_was);
}

void bench_model_7b(CudaBackend* b, double ceiling_gbs, Table* table) {
  Model m = build(b);
  const double weight_bytes = 2.0 * (kLayers * (kQkv * kHidden + kQkv + kHidden * kHidden + 2 * kInter * kHidden +
                                                kHidden * kInter + 2 * kHidden) + kHidden + kVocab * kHidden);
  // Decode: 128-token prompt + 256 generated -> the mean context is 256.
  const int ctx = 256, graph_max_ctx = kCacheBlocks * kBlock;
  set_inputs(b, m, 1, ctx);
  (void)b->reserve_scratch(64u << 20);
  if (Status st = forward(b, m, 1, graph_max_ctx); !st.is_ok()) {
    std::printf("decode forward failed: %s\n", st.to_string().c_str());
    return;
  }
  const double kv_bytes = 2.0 * 2 * kLayers * ctx * kKv * kHd;
  const double bytes = weight_bytes + kv_bytes;
  Timing eager = time_op(b->stream(), 20, 5, [&](int) { (void)forward(b, m, 1, graph_max_ctx); });
  table->add({"7B decode step, eager launches", eager, 1e6 / eager.median_us, "tok/s",
              100 * (bytes / (eager.median_us * 1e3)) / ceiling_gbs});
  GraphCache graphs(b);
  if (Status st = graphs.ensure(1, [&] { return forward(b, m, 1, graph_max_ctx); }); !st.is_ok()) {
    std::printf("graph capture failed: %s\n", st.to_string().c_str());
    return;
  }
  Timing tg = time_op(b->stream(), 30, 10, [&](int) { (void)graphs.replay(1); });
  const double gbs = bytes / (tg.median_us * 1e3);
  if (pdl_enabled()) {  // the same graph without programmatic dependent launch, for comparison
    set_pdl_enabled(false);
    GraphCache plain(b);
    if (plain.ensure(1, [&] { return forward(b, m, 1, graph_max_ctx); }).is_ok()) {
      Timing tn = time_op(b->stream(), 30, 10, [&](int) { (void)plain.replay(1); });
      table->add({"7B decode step, CUDA graph without PDL", tn, 1e6 / tn.median_us, "tok/s",
                  100 * (bytes / (tn.median_us * 1e3)) / ceiling_gbs});
    }
    set_pdl_enabled(true);
  }
  table->add({"7B decode step, CUDA graph (ctx 256)", tg, 1e6 / tg.median_us, "tok/s", 100 * gbs / ceiling_gbs});
  // The fused ops (rope_kv_write, the gate_up GEMV's silu epilogue) against their sequences of
  // kernels, each graph captured with the backend's switch as named (FRUGAL_FUSE_ROPE_KV /
  // FRUGAL_FUSE_SILU): the step time each fusion saves.
  struct Fusion {
    bool rope_kv, silu;
    const char* name;
  };
  for (Fusion f : {Fusion{false, false, "unfused (rope, kv_write, silu_mul kernels)"}, Fusion{true, false, "rope_kv_write fused only"},
                   Fusion{false, true, "silu epilogue fused only"}}) {
    const bool rope_was = b->fuse_rope_kv(), silu_was = b->fuse_silu_mul();
    b->set_fuse_rope_kv(f.rope_kv);
    b->set_fuse_silu_mul(f.silu);
    GraphCache g(b);
    if (g.ensure(1, [&] { return forward(b, m, 1, graph_max_ctx); }).is_ok()) {
      Timing tf = time_op(b->stream(), 30, 10, [&](int) { (void)g.replay(1); });
      table->add({std::string("7B decode step, CUDA graph, ") + f.name, tf, 1e6 / tf.median_us, "tok/s",
                  100 * (bytes / (tf.median_us * 1e3)) / ceiling_gbs});
    }
    b->set_fuse_rope_kv(rope_was);
    b->set_fuse_silu_mul(silu_was);
  }
  table->add({"7B decode step, CUDA graph: bandwidth", tg, gbs, "GB/s", 100 * gbs / ceiling_gbs});
  std::printf("7B decode: %.2f GB per token (weights %.2f, KV %.3f); roofline %.0f tok/s at %.0f GB/s\n", bytes / 1e9,
              weight_bytes / 1e9, kv_bytes / 1e9, ceiling_gbs * 1e9 / bytes, ceiling_gbs);

  // Prefill of a 2048-token prompt (eager: one launch sequence per prompt).
  const int n = 2048;
  set_inputs(b, m, n, n);
  Timing tp = time_op(b->stream(), 10, 2, [&](int) { (void)forward(b, m, n, n); });
  const double flops_per_tok = 2.0 * (kLayers * (kQkv * kHidden + kHidden * kHidden + 3 * kInter * kHidden));
  const double attn_flops = 4.0 * kHd * kHeads * kLayers * (double(n) * (n + 1) / 2);
  const double tflops = (flops_per_tok * n + attn_flops) / (tp.median_us * 1e6);
  table->add({"7B prefill 2048 tokens", tp, n * 1e6 / tp.median_us, "tok/s", -1});
  table->add({"7B prefill 2048 tokens: compute", tp, tflops, "TFLOP/s", 100 * tflops / 790.0});
}

}  // namespace frugal::cuda::bench
