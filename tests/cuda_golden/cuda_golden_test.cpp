// Golden fixtures (tests/data/golden_bf16: transformers fp32 references of bf16 models shaped like
// trained ones) on the CUDA backend, which computes in bf16 with fp32 accumulation (issue 4,
// acceptance 1). The fp32 fixtures in tests/data/golden (std 0.15 everywhere) are too sensitive
// for bf16 activations: exact arithmetic with bf16 storage (the ref backend with bf16
// activations) misses 2e-2 on a third of their rows, as CUDA does (docs/perf/2026-11-29-h200.md).
//   - every teacher-forced logits row within 2e-2 relative error (max_j |ours - ref| / max_j |ref|);
//   - the same argmax as the reference on >= 99% of all teacher-forced positions (pooled over
//     fixtures; positions whose reference top-2 gap is below the bf16 error bound are still
//     counted — nothing is excluded).
#include <filesystem>

#include <gtest/gtest.h>

#include "backend/cuda/cuda_backend.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "moe_routes.h"
#include "ops/ref_backend.h"
#include "test_paths.h"

namespace frugal::model {
namespace {

constexpr double kTol = 2e-2;

std::vector<std::string> fixtures() {
  std::vector<std::string> out;
  // The bf16 profile of scripts/golden/make_golden.py: shaped like a trained model (see there).
  const auto root = std::filesystem::path(frugal::testing::source_root()) / "tests/data/golden_bf16";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root, ec))
    if (e.is_directory() && std::filesystem::exists(e.path() / "reference.safetensors")) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

double row_rel_error(const float* a, const float* b, int64_t n) {
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    ref = std::max(ref, std::abs(static_cast<double>(b[i])));
  }
  return ref == 0 ? diff : diff / ref;
}

// Teacher-forced logits of one fixture on `backend`: every row within kTol; counts positions and
// argmax agreements into the pooled totals.
void check_fixture(ops::Backend* backend, const std::string& dir, int64_t& positions, int64_t& agree) {
  SCOPED_TRACE(dir);
  auto ref = SafetensorsSet::open_file(dir + "/reference.safetensors");
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  const TensorEntry* ids_t = (*ref)->find("input_ids");
  ASSERT_NE(ids_t, nullptr);
  std::vector<int32_t> ids(static_cast<size_t>(ids_t->shape.numel()));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(reinterpret_cast<const int64_t*>(ids_t->data)[i]);
  const int32_t T = static_cast<int32_t>(ids.size());
  auto m = Model::load(dir, backend, LoadOptions{.max_logit_rows = T});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const auto& c = (*m)->config();
  auto kv = KvStorage::create(backend, c, {.n_blocks = (T + 15) / 16, .block_size = 16});
  ASSERT_TRUE(kv.is_ok()) << kv.status().to_string();
  std::vector<int32_t> pos(ids.size()), table;
  for (int32_t i = 0; i < T; ++i) pos[static_cast<size_t>(i)] = i;
  for (int32_t b = 0; b < (T + 15) / 16; ++b) table.push_back(b);
  const std::vector<int32_t> q_start = {0, T}, ctx = {T};
  std::vector<float> logits(static_cast<size_t>(T * c.vocab_size));
  ASSERT_TRUE((*m)->forward({.tokens = ids, .positions = pos, .q_start = q_start, .ctx_len = ctx,
                             .block_tables = table, .max_blocks_per_seq = static_cast<int32_t>(table.size()),
                             .slot_mapping = pos, .logits_rows = pos}, **kv, logits.data()).is_ok());
  const float* want = reinterpret_cast<const float*>((*ref)->find("logits")->data);
  for (int32_t t = 0; t < T; ++t) {
    const float* a = logits.data() + t * c.vocab_size;
    const float* b = want + t * c.vocab_size;
    EXPECT_LE(row_rel_error(a, b, c.vocab_size), kTol) << "logits row " << t;
    ++positions;
    agree += (std::max_element(a, a + c.vocab_size) - a) == (std::max_element(b, b + c.vocab_size) - b) ? 1 : 0;
  }
}

TEST(CudaGolden, LogitsWithinBf16ToleranceAndArgmaxAgrees) {
  auto backend = cuda::make_cuda_backend(0);
  ASSERT_TRUE(backend.is_ok()) << backend.status().to_string();
  int64_t positions = 0, agree = 0;
  const auto dirs = fixtures();
  ASSERT_FALSE(dirs.empty());
  for (const auto& dir : dirs) check_fixture(backend->get(), dir, positions, agree);
  const double frac = static_cast<double>(agree) / static_cast<double>(positions);
  std::printf("argmax agreement: %lld / %lld = %.4f\n", static_cast<long long>(agree), static_cast<long long>(positions), frac);
  EXPECT_GE(frac, 0.99);
}

// Issue 19, acceptance 1 on the GPU: the DeepSeek-V2 / V3 goldens (MLA with the latent cache,
// MoE routing, interleaved YaRN rope) and Qwen2 with YaRN, bf16 activations: 2e-2 per row and
// >= 99% argmax agreement pooled over the three. The fp32 fixtures have router near ties (V3:
// gaps down to 1.5e-4 between the 4th and 5th expert score) that bf16 rounding of the router's
// input flips, on the exact-arithmetic reference with bf16 storage too
// (DeepseekBf16.RouteFlipsOnlyAtNearTies); a flipped route changes that token's output by
// design. So per MoE layer and token, the CUDA routes are compared with the fp32 reference's
// (which equals transformers', tests/model): each must equal what the GPU's own f32 router
// logits choose (the GPU top-k), and each route that differs from fp32 must be a near tie
// (gap <= 4 x the token's score shift, tests/model/moe_routes.h); those tokens' rows are
// printed with their error and left out of the 2e-2 check (still counted for argmax); every
// other row is held to 2e-2.
TEST(CudaGolden, DeepseekAndYarnWithinBf16Tolerance) {
  auto backend = cuda::make_cuda_backend(0);
  ASSERT_TRUE(backend.is_ok()) << backend.status().to_string();
  int64_t positions = 0, agree = 0;
  const auto root = std::filesystem::path(frugal::testing::source_root()) / "tests/data/golden";
  check_fixture(backend->get(), (root / "qwen2_yarn").string(), positions, agree);
  for (const char* name : {"deepseek_v2", "deepseek_v3"}) {
    SCOPED_TRACE(name);
    const std::string dir = (root / name).string();
    auto ref = SafetensorsSet::open_file(dir + "/reference.safetensors");
    ASSERT_TRUE(ref.is_ok());
    const TensorEntry* ids_t = (*ref)->find("input_ids");
    std::vector<int32_t> ids(static_cast<size_t>(ids_t->shape.numel()));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(reinterpret_cast<const int64_t*>(ids_t->data)[i]);
    const int32_t T = static_cast<int32_t>(ids.size());
    frugal::testing::TapsRun f32, gpu;
    auto host = ops::make_ref_backend(DType::kF32);
    ASSERT_TRUE(frugal::testing::teacher_forced_run(dir, host.get(), ids, f32).is_ok());
    const Status st = frugal::testing::teacher_forced_run(dir, backend->get(), ids, gpu);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    const auto cmp = frugal::testing::compare_routes(dir, f32, gpu, T);
    std::printf("%s on CUDA: %d of %d routes differ from fp32\n%s", name, cmp.flips, cmp.decisions, cmp.report.c_str());
    EXPECT_EQ(cmp.unexplained, 0) << "route flips that rounding does not explain";
    EXPECT_EQ(cmp.own_mismatch, 0) << "the GPU top-k disagrees with its own router logits";
    const int64_t V = f32.config.vocab_size;
    const float* want = reinterpret_cast<const float*>((*ref)->find("logits")->data);
    for (int32_t t = 0; t < T; ++t) {
      const float* a = gpu.logits.data() + t * V;
      const float* b = want + t * V;
      const double err = row_rel_error(a, b, V);
      if (cmp.flipped[static_cast<size_t>(t)]) std::printf("  row %d (near-tie route flip): error %.3g\n", t, err);
      else EXPECT_LE(err, kTol) << "logits row " << t;
      ++positions;
      agree += (std::max_element(a, a + V) - a) == (std::max_element(b, b + V) - b) ? 1 : 0;
    }
  }
  const double frac = static_cast<double>(agree) / static_cast<double>(positions);
  std::printf("argmax agreement: %lld / %lld = %.4f\n", static_cast<long long>(agree), static_cast<long long>(positions), frac);
  EXPECT_GE(frac, 0.99);
}

}  // namespace
}  // namespace frugal::model
