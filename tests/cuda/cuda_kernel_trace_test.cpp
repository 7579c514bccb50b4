// The CUPTI kernel tracer (backend/cuda/kernel_tracer.h) on the GPU: it records eager launches and
// every kernel of graph replays (graphs instantiated before tracing started, as the engine's are),
// with the graph launch's correlation shared by its kernels; a second trace sees only its own
// launches. And `frugal bench offline --kernel-trace` on the engine: decode steps are graph
// replays, a prefill is one eager step, and the accounting adds up.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <map>
#include <set>
#include <string>

#include "backend/cuda/kernel_tracer.h"
#include "backend/cuda/kernels.h"
#include "bench/kernel_trace.h"
#include "bench/offline.h"
#include "test_paths.h"

namespace frugal::cuda {
namespace {

std::unique_ptr<KernelTracer> tracer_or_skip() {
  auto t = make_kernel_tracer();
  if (!t.is_ok()) return nullptr;
  return std::move(*t);
}

int count_named(const std::vector<KernelRecord>& rs, const std::string& part, bool in_graph) {
  int n = 0;
  for (const auto& r : rs) n += r.name.find(part) != std::string::npos && (r.graph_id != 0) == in_graph ? 1 : 0;
  return n;
}

TEST(CudaKernelTrace, RecordsEagerLaunchesAndEveryKernelOfGraphReplays) {
  auto tracer = tracer_or_skip();
  if (!tracer) GTEST_SKIP() << "built without CUPTI";
  const int64_t m = 64, n = 1024;
  float* y = nullptr;
  float* bias = nullptr;
  ASSERT_EQ(cudaMalloc(&y, m * n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&bias, n * sizeof(float)), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  // The graph: fill then bias_add, captured and instantiated before tracing starts.
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(launch_fill_uniform(y, DType::kF32, m * n, 1, -1, 1, s), cudaSuccess);
  ASSERT_EQ(launch_bias_add(y, DType::kF32, n, bias, DType::kF32, m, n, s), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  ASSERT_EQ(launch_fill_uniform(bias, DType::kF32, n, 2, -1, 1, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);

  ASSERT_TRUE(tracer->start().is_ok());
  EXPECT_FALSE(tracer->start().is_ok());  // one trace at a time
  ASSERT_EQ(launch_fill_uniform(bias, DType::kF32, n, 3, -1, 1, s), cudaSuccess);
  ASSERT_EQ(launch_fill_uniform(bias, DType::kF32, n, 4, -1, 1, s), cudaSuccess);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  auto recs = tracer->stop();
  ASSERT_TRUE(recs.is_ok()) << recs.status().to_string();
  const auto& rs = *recs;
  ASSERT_EQ(rs.size(), 12u);
  EXPECT_EQ(count_named(rs, "fill_uniform_kernel", false), 2);
  EXPECT_EQ(count_named(rs, "fill_uniform_kernel", true), 5);
  EXPECT_EQ(count_named(rs, "bias_add_kernel", true), 5);
  // Each replay's two kernels share its launch's correlation; five distinct ones.
  std::map<uint32_t, int> per_launch;
  for (const auto& r : rs) {
    EXPECT_LE(r.start_ns, r.end_ns) << r.name;
    EXPECT_GT(r.block[0], 0) << r.name;
    if (r.graph_id != 0) ++per_launch[r.correlation];
  }
  ASSERT_EQ(per_launch.size(), 5u);
  for (const auto& [corr, k] : per_launch) EXPECT_EQ(k, 2) << corr;
  for (size_t i = 1; i < rs.size(); ++i) EXPECT_LE(rs[i - 1].start_ns, rs[i].start_ns);

  auto a = bench::analyze_kernel_trace(rs, {});
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ((*a)["mode"], "graph");
  EXPECT_DOUBLE_EQ((*a)["steps"].get<double>(), 3);
  EXPECT_NEAR((*a)["launches"].get<double>(), 2, 1e-9);
  EXPECT_NEAR((*a)["step_us"].get<double>(),
              (*a)["kernel_us"].get<double>() + (*a)["gap_inside_us"].get<double>() + (*a)["gap_between_us"].get<double>(),
              1e-6);

  // A second trace: only what it saw.
  ASSERT_TRUE(tracer->start().is_ok());
  ASSERT_EQ(launch_fill_uniform(bias, DType::kF32, n, 5, -1, 1, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  auto again = tracer->stop();
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  ASSERT_EQ(again->size(), 1u);
  EXPECT_NE((*again)[0].name.find("fill_uniform_kernel"), std::string::npos) << (*again)[0].name;
  EXPECT_FALSE(tracer->stop().is_ok());  // not recording

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  cudaFree(y);
  cudaFree(bias);
}

TEST(CudaKernelTrace, BenchOfflineTracesTheEngineSteps) {
  auto tracer = tracer_or_skip();
  if (!tracer) GTEST_SKIP() << "built without CUPTI";
  bench::OfflineOptions o;
  o.engine.model_dir = frugal::testing::source_root() + "/models/stories260K";
  o.engine.device = "cuda";
  o.prefill_lens = {64};
  o.batches = {2};
  o.decode_prompt_len = 16;
  o.decode_tokens = 24;
  o.reps = 1;
  o.warmup = 1;
  o.kernel_tracer = std::shared_ptr<KernelTracer>(std::move(tracer));
  auto r = bench::run_offline(o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const auto& p = (*r)["prefill"][0]["kernel_trace"];
  EXPECT_EQ(p["mode"], "eager");
  EXPECT_DOUBLE_EQ(p["steps"].get<double>(), 1);
  EXPECT_GT(p["kernel_us"].get<double>(), 0);
  const auto& d = (*r)["decode"][0]["kernel_trace"];
  EXPECT_EQ(d["mode"], "graph");
  // 24 tokens: the first comes from the prefill step, so about 23 decode replays less the two edges.
  EXPECT_GE(d["steps"].get<double>(), 15);
  EXPECT_LE(d["steps"].get<double>(), 23);
  EXPECT_GT(d["launches"].get<double>(), 5);
  EXPECT_NEAR(d["step_us"].get<double>(),
              d["kernel_us"].get<double>() + d["gap_inside_us"].get<double>() + d["gap_between_us"].get<double>(), 1e-6);
  double own = d["kernels_other_own_us"].get<double>();
  for (const auto& k : d["kernels"]) own += k["own_us"].get<double>();
  EXPECT_NEAR(own, d["kernel_us"].get<double>(), 1e-6);
  std::printf("%s", bench::format_kernel_trace("decode b=2 (stories260K)", d, 12).c_str());
}

}  // namespace
}  // namespace frugal::cuda
