// CPU quantized-matmul micro-benchmarks (Google Benchmark) on the DeepSeek-R1-Distill-Qwen-1.5B
// linear shapes (hidden 1536, intermediate 8960, 2 kv heads of 128).
//
// What is measured: one quant_matmul call on the global thread pool (FRUGAL_THREADS), weights
// rotated through copies larger than the last-level cache so decode numbers are DRAM numbers.
// Excluded: weight conversion, allocation, input generation. Reported: bytes/s of the weight
// bytes actually stored (codes + scales + offsets) plus activations, GFLOP/s, and "of_bw", the
// fraction of the read bandwidth measured here with all pool threads (the batch-1 ceiling).
//   build/tools/bench_cpu_quant --benchmark_filter='m:1/'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <vector>

#include "backend/cpu/quant_matmul.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace frugal {
namespace {

using quant::CodeKind;
using quant::QuantWeight;

constexpr size_t kRotateBytes = size_t{384} << 20;

uint64_t next_rand() {
  static uint64_t s = 0x9e3779b97f4a7c15ull;
  s ^= s << 13, s ^= s >> 7, s ^= s << 17;
  return s;
}

double measured_read_bandwidth() {
  static const double bw = [] {
    std::vector<uint64_t> buf(kRotateBytes / 8, 1);
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
      std::atomic<uint64_t> total{0};
      auto t0 = std::chrono::steady_clock::now();
      ThreadPool::global().parallel_for(static_cast<int64_t>(buf.size()), 1 << 16, [&](int64_t b, int64_t e) {
        uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (int64_t i = b; i + 4 <= e; i += 4) a0 += buf[i], a1 += buf[i + 1], a2 += buf[i + 2], a3 += buf[i + 3];
        total += a0 + a1 + a2 + a3;
      });
      benchmark::DoNotOptimize(total.load());
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, static_cast<double>(kRotateBytes) / s);
    }
    std::fprintf(stderr, "measured read bandwidth: %.1f GB/s (%d threads, %s)\n", best / 1e9,
                 ThreadPool::global().size(), cpu_isa_level());
    return best;
  }();
  return bw;
}

enum Format : int { kInt8Channel, kInt4G128, kNf4G64, kFp8Block };
const char* format_name(int f) {
  switch (f) {
    case kInt8Channel: return "int8-channel";
    case kInt4G128: return "int4-g128-zp";
    case kNf4G64: return "nf4-g64";
    default: return "fp8-block128";
  }
}

// A random weight of the format, built directly in the internal layout (conversion not timed).
QuantWeight random_weight(int f, int64_t n, int64_t k) {
  QuantWeight w;
  switch (f) {
    case kInt8Channel: w = quant::make_quant_weight(CodeKind::kQ8, n, k, k, 1); break;
    case kInt4G128: w = quant::make_quant_weight(CodeKind::kQ4, n, k, 128, 1); break;
    case kNf4G64: w = quant::make_quant_weight(CodeKind::kQ4, n, k, 64, 1); break;
    default: w = quant::make_quant_weight(CodeKind::kF8, n, k, 128, 128); break;
  }
  for (auto& b : w.q) b = static_cast<uint8_t>(next_rand() & (f == kFp8Block ? 0x77 : 0xff));
  for (auto& s : w.scale) s = 1e-3f * static_cast<float>(next_rand() % 100 + 1);
  if (w.kind == CodeKind::kQ4) {
    w.lut.resize(16);
    for (int c = 0; c < 16; ++c) w.lut[static_cast<size_t>(c)] = f == kNf4G64 ? quant::kNf4Table[c] : static_cast<float>(c);
  }
  if (f == kInt4G128) {
    w.offset.resize(static_cast<size_t>(n * w.n_groups));
    for (auto& o : w.offset) o = -8e-3f;
  }
  return w;
}

// hot: one copy, so the weight stays in cache (the kernel's compute rate, not DRAM's).
const std::vector<QuantWeight>& weights(int f, int64_t n, int64_t k, bool hot = false) {
  static std::map<std::tuple<int, int64_t, int64_t, bool>, std::vector<QuantWeight>> cache;
  auto key = std::make_tuple(f, n, k, hot);
  auto it = cache.find(key);
  if (it == cache.end()) {
    QuantWeight w = random_weight(f, n, k);
    const size_t copies = hot ? 1 : std::max<size_t>(1, kRotateBytes / static_cast<size_t>(w.bytes()));
    it = cache.emplace(key, std::vector<QuantWeight>(copies, w)).first;
  }
  return it->second;
}

// Args: m, n, k, format, path (0: the default path; 1: exact f32 activations, i.e. for m > 8 the
// previous GEMM that dequantizes 64-row blocks to f32 for the dense packed GEMM: the A/B of the
// int8-activation GEMM).
void BM_QuantMatmul(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const int f = static_cast<int>(state.range(3));
  const bool exact = state.range(4) != 0, hot = state.range(5) != 0;
  const std::vector<QuantWeight>& ws = weights(f, n, k, hot);
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
  for (auto& v : x) v = static_cast<float>(next_rand() % 2001) * 1e-3f - 1.0f;
  size_t i = 0;
  for (auto _ : state) {
    const QuantWeight& w = ws[i++ % ws.size()];
    Status st = cpu::quant_matmul(ThreadPool::global(), {.x = x.data(), .ld_x = k, .w = &w, .y = y.data(), .ld_y = n, .m = m,
                                                                 .exact_activations = exact});
    if (!st.is_ok()) {
      state.SkipWithError(st.to_string().c_str());
      break;
    }
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(ws[0].bytes()) + 4.0 * static_cast<double>(x.size() + y.size());
  state.SetBytesProcessed(static_cast<int64_t>(static_cast<double>(state.iterations()) * bytes));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["of_bw"] = benchmark::Counter(bytes / measured_read_bandwidth(),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(format_name(f)) + " " + cpu::best_quant_kernels().isa + (exact ? " f32-x" : "") + (hot ? " hot" : ""));
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "n", "k", "fmt", "exact", "hot"});
  for (int f : {kInt8Channel, kInt4G128, kNf4G64, kFp8Block})
    for (int64_t m : {1, 64})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{1536, 1536}, {256, 1536}, {8960, 1536}, {1536, 8960}}) {
        b->Args({m, n, k, f, 0, 0});
        if (m > 8 && (f == kInt8Channel || f == kInt4G128)) b->Args({m, n, k, f, 1, 0});
      }
  // Decode from cache (1536 x 1536: 2.4 MB int8, 1.3 MB int4): what the GEMV computes per
  // second when DRAM is not the limit; above the read ceiling means decode is bandwidth bound.
  for (int f : {kInt8Channel, kInt4G128, kNf4G64, kFp8Block}) b->Args({1, 1536, 1536, f, 0, 1});
  b->Repetitions(5)->ReportAggregatesOnly(true)->UseRealTime()->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_QuantMatmul)->Apply(shapes);

}  // namespace
}  // namespace frugal

BENCHMARK_MAIN();
