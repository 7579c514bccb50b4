// CPU backend micro-benchmarks (Google Benchmark) for the DeepSeek-R1-Distill-Qwen-1.5B shapes
// (hidden 1536, intermediate 8960, 12 query / 2 kv heads of 128, vocab 151936).
//
// What is measured: one backend op call, on the global thread pool (FRUGAL_THREADS sets its
// size), with weights rotated through copies larger than the last-level cache so GEMV numbers are
// DRAM numbers, not cache numbers. Excluded: allocation and input generation.
// Reported: bytes/s (weights + activations moved), GFLOP/s, and "of_bw", the fraction of the
// machine's read bandwidth measured by BM_MemoryRead (the ceiling for batch-1 decode).
//   build-x/tools/bench_cpu_ops --benchmark_filter=Gemv   (repetitions: median, mean, stddev, cv)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/cpu_features.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace frugal {
namespace {

constexpr size_t kRotateBytes = size_t{512} << 20;  // weight copies cycled per iteration (>> LLC)
constexpr int kRepetitions = 5;

// Deterministic non-trivial values (never time on zeros); bf16/f16 bit patterns of small floats.
void fill_random(void* dst, size_t nbytes, DType t) {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  auto next = [&] { s ^= s << 13, s ^= s >> 7, s ^= s << 17; return s; };
  if (t == DType::kF32) {
    auto* f = static_cast<float*>(dst);
    for (size_t i = 0; i < nbytes / 4; ++i) f[i] = static_cast<float>(next() % 2001) * 1e-3f - 1.0f;
    return;
  }
  auto* h = static_cast<uint16_t*>(dst);
  const float scale = 1e-3f;
  for (size_t i = 0; i < nbytes / 2; ++i) {
    const float v = (static_cast<float>(next() % 2001) - 1000.0f) * scale;
    h[i] = t == DType::kBF16 ? f32_to_bf16(v) : f32_to_f16(v);
  }
}

// Sums a buffer with all pool threads: the read bandwidth ceiling for weight streaming.
uint64_t read_all(const uint64_t* p, size_t n) {
  std::atomic<uint64_t> total{0};
  ThreadPool::global().parallel_for(static_cast<int64_t>(n), 1 << 16, [&](int64_t b, int64_t e) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (int64_t i = b; i + 4 <= e; i += 4) a0 += p[i], a1 += p[i + 1], a2 += p[i + 2], a3 += p[i + 3];
    total += a0 + a1 + a2 + a3;
  });
  return total;
}

const HostBuffer& bandwidth_buffer() {
  static HostBuffer buf = [] {
    HostBuffer b(kRotateBytes);
    std::memset(b.data(), 1, b.size());
    return b;
  }();
  return buf;
}

// Best of a few full passes, in bytes/s; cached for the "of_bw" counters.
double measured_read_bandwidth() {
  static const double bw = [] {
    const auto& b = bandwidth_buffer();
    double best = 0;
    for (int i = 0; i < 5; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize(read_all(b.as<uint64_t>(), b.size() / 8));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, static_cast<double>(b.size()) / s);
    }
    std::fprintf(stderr, "measured read bandwidth: %.1f GB/s (%d threads, %s kernels)\n", best / 1e9,
                 ThreadPool::global().size(), cpu_isa_level());
    return best;
  }();
  return bw;
}

void BM_MemoryRead(benchmark::State& state) {
  const auto& b = bandwidth_buffer();
  for (auto _ : state) benchmark::DoNotOptimize(read_all(b.as<uint64_t>(), b.size() / 8));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(b.size()));
}

void BM_MemoryCopy(benchmark::State& state) {
  const size_t n = kRotateBytes / 2;
  HostBuffer src(n), dst(n);
  std::memset(src.data(), 1, n);
  std::memset(dst.data(), 0, n);
  for (auto _ : state) {
    ThreadPool::global().parallel_for(static_cast<int64_t>(n >> 20), 1, [&](int64_t b, int64_t e) {
      std::memcpy(dst.as<char>() + (b << 20), src.as<char>() + (b << 20), static_cast<size_t>(e - b) << 20);
    });
    benchmark::ClobberMemory();
  }
  // Bytes read + written, as PERFORMANCE.md counts device copies.
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(2 * n));
}

// One weight arena per dtype, filled once and shared by every shape (filling is slow).
const HostBuffer& weight_arena(DType t, size_t min_bytes) {
  static std::map<std::pair<DType, size_t>, HostBuffer> arenas;
  const size_t bytes = std::max(kRotateBytes, min_bytes);
  auto it = arenas.find({t, bytes});
  if (it == arenas.end()) {
    it = arenas.emplace(std::make_pair(t, bytes), HostBuffer(bytes)).first;
    fill_random(it->second.data(), bytes, t);
  }
  return it->second;
}

// Args: m, n, k, weight dtype.
void BM_Matmul(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const auto wt = static_cast<DType>(state.range(3));
  const size_t w_bytes = static_cast<size_t>(dtype_bytes(wt, n * k));
  const HostBuffer& w = weight_arena(wt, w_bytes);
  const size_t copies = std::max<size_t>(1, w.size() / w_bytes);
  HostBuffer x(static_cast<size_t>(m * k) * 4), y(static_cast<size_t>(m * n) * 4);
  fill_random(x.data(), x.size(), DType::kF32);
  auto backend = make_cpu_backend();
  ops::MatmulParams p{.x = x.data(), .x_dtype = DType::kF32, .ld_x = k, .w = ops::dense_weight(nullptr, wt),
                      .bias = nullptr, .bias_dtype = DType::kF32, .y = y.data(), .y_dtype = DType::kF32,
                      .ld_y = n, .m = m, .n = n, .k = k, .accumulate = false};
  size_t i = 0;
  for (auto _ : state) {
    p.w.data = w.as<char>() + (i++ % copies) * w_bytes;
    if (Status st = backend->matmul(p); !st.is_ok()) {
      state.SkipWithError(st.to_string().c_str());
      break;
    }
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(w_bytes + x.size() + y.size());
  state.SetBytesProcessed(static_cast<int64_t>(static_cast<double>(state.iterations()) * bytes));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["of_bw"] = benchmark::Counter(bytes / measured_read_bandwidth(),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(dtype_name(wt)) + " " + backend->name());
}

// Decode attention: one sequence, one query token over ctx cached tokens. Args: ctx, cache dtype.
void BM_AttentionDecode(benchmark::State& state) {
  const int32_t ctx = static_cast<int32_t>(state.range(0)), n_head = 12, n_kv = 2, d = 128, bs = 16;
  const auto ct = static_cast<DType>(state.range(1));
  const int32_t n_blocks = (ctx + bs - 1) / bs;
  const size_t cache_bytes = static_cast<size_t>(dtype_bytes(ct, int64_t{n_blocks} * bs * n_kv * d));
  HostBuffer kc(cache_bytes), vc(cache_bytes), q(size_t{n_head} * d * 4), out(size_t{n_head} * d * 4);
  fill_random(kc.data(), cache_bytes, ct);
  fill_random(vc.data(), cache_bytes, ct);
  fill_random(q.data(), q.size(), DType::kF32);
  std::vector<int32_t> table(static_cast<size_t>(n_blocks)), q_start = {0, 1}, ctx_len = {ctx};
  for (int32_t b = 0; b < n_blocks; ++b) table[static_cast<size_t>(b)] = (b * 7) % n_blocks;  // scattered if coprime
  auto backend = make_cpu_backend();
  ops::AttentionParams p{
      .cache = {.k_cache = kc.data(), .v_cache = vc.data(), .cache_dtype = ct, .n_blocks = n_blocks,
                .block_size = bs, .n_head_kv = n_kv, .head_dim = d},
      .q = q.data(), .out = out.data(), .act_dtype = DType::kF32, .ld_q = n_head * d, .ld_out = n_head * d,
      .n_seqs = 1, .n_tokens = 1, .q_start = q_start.data(), .ctx_len = ctx_len.data(),
      .block_tables = table.data(), .max_blocks_per_seq = n_blocks, .max_ctx_len = ctx, .n_head = n_head,
      .sliding_window = 0, .scale = 0.088f};
  for (auto _ : state) {
    if (Status st = backend->attention(p); !st.is_ok()) {
      state.SkipWithError(st.to_string().c_str());
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(2 * cache_bytes));
}

constexpr int64_t kBF16 = static_cast<int64_t>(DType::kBF16);
constexpr int64_t kF16 = static_cast<int64_t>(DType::kF16);
constexpr int64_t kF32 = static_cast<int64_t>(DType::kF32);

void matmul_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "n", "k", "dtype"});
  // Qwen-1.5B per layer: qkv (2048 x 1536), o (1536 x 1536), gate/up (8960 x 1536), down (1536 x 8960).
  const int64_t shapes[][2] = {{2048, 1536}, {1536, 1536}, {8960, 1536}, {1536, 8960}};
  for (int64_t m : {1, 4, 8})
    for (const auto& s : shapes) b->Args({m, s[0], s[1], kBF16});
  b->Args({1, 8960, 1536, kF16});
  b->Args({1, 8960, 1536, kF32});
  b->Args({1, 151936, 1536, kBF16});  // lm_head
  for (const auto& s : shapes) b->Args({64, s[0], s[1], kBF16});  // prefill pp64
  b->Args({64, 8960, 1536, kF32});
}

BENCHMARK(BM_MemoryRead)->Unit(benchmark::kMillisecond)->UseRealTime()->Repetitions(kRepetitions);
BENCHMARK(BM_MemoryCopy)->Unit(benchmark::kMillisecond)->UseRealTime()->Repetitions(kRepetitions);
BENCHMARK(BM_Matmul)->Apply(matmul_shapes)->Unit(benchmark::kMicrosecond)->UseRealTime()->Repetitions(kRepetitions);
BENCHMARK(BM_AttentionDecode)
    ->ArgNames({"ctx", "dtype"})
    ->Args({1024, kBF16})
    ->Args({4096, kBF16})
    ->Args({4096, kF32})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->Repetitions(kRepetitions);

}  // namespace
}  // namespace frugal

BENCHMARK_MAIN();
