// The op harness (STYLE.md habit 1, after llama.cpp's test-backend-ops): every op of a backend
// against ops::ref on odd and aligned shapes, every supported dtype, non-contiguous rows, with
// guard bytes around every device buffer and NaN sentinels in row gaps.
//
// One test per op of ops/op_list.h (required and fused), each running OpCases::<op>() on the backend; the backend's
// SupportTable (harness_support.cpp) says which cases it must run: a refusal it does not
// expect fails (the harness never silently skips). Suites are value-parameterized over a
// backend name; a test directory instantiates them with
//   FRUGAL_INSTANTIATE_OP_HARNESS(Cpu, "cpu");
// and links frugal_op_harness (tests/ops for "cpu", tests/cuda for "cuda").
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "ops/backend.h"
#include "ops/op_list.h"

namespace frugal::testing {

// Referenced from this header so that a test binary linking the static library always pulls in
// the TEST_P files (whose registrations would otherwise be dropped by the linker).
extern int g_op_harness_anchor;            // harness.cpp
extern int g_op_harness_attention_anchor;  // harness_attention.cpp
[[gnu::used]] static int* const kOpHarnessAnchors[] = {&g_op_harness_anchor, &g_op_harness_attention_anchor};

// A host matrix [rows, cols] with row stride ld (elements) in any float dtype. Cells past cols in
// each row (the gap) hold a sentinel: NaN for inputs, so a kernel that reads them shows it.
struct HostMat {
  DType dtype = DType::kF32;
  int64_t rows = 0, cols = 0, ld = 0;
  std::vector<uint8_t> bytes;

  HostMat() = default;
  HostMat(DType t, int64_t rows, int64_t cols, int64_t ld);
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }
  float get(int64_t r, int64_t c) const;
  void set(int64_t r, int64_t c, float v);
  // Uniform values in [-scale, scale] rounded to dtype; gaps NaN.
  void fill_random(std::mt19937& rng, float scale);
};

// A device buffer with kGuardBytes of known pattern on both sides; check_guards() downloads
// them and reports any byte a kernel wrote out of bounds.
class GuardedBuffer {
 public:
  static constexpr size_t kGuardBytes = 256;
  GuardedBuffer(ops::Backend* backend, const void* host, size_t nbytes);
  void* ptr() const { return static_cast<uint8_t*>(buf_.data()) + kGuardBytes; }
  std::vector<uint8_t> download() const;
  ::testing::AssertionResult check_guards(const std::string& what) const;

 private:
  ops::Backend* backend_;
  ops::DeviceBuffer buf_;
  size_t nbytes_;
};

// Compares got against want cell by cell: |got - want| <= tol * (|want| + rms(want)), no NaN/Inf
// where want is finite; gap cells of got must equal those of `gaps` byte for byte.
::testing::AssertionResult compare_mats(const HostMat& got, const HostMat& want, const HostMat& gaps,
                                        double tol, const std::string& what);
// The same for a flat array of n floats in dtype t.
::testing::AssertionResult compare_flat(DType t, const void* got, const void* want, int64_t n, double tol,
                                        const std::string& what);

// CUDA's FP8 W8A8 path rounds x to E4M3 per token (or per token and 128 inputs): each x_j moves by
// at most |x_j| / 16, or (subnormal) amax(its token) / 448 / 1024. Expects every
// |got - want| <= sum_j |w[o, j]| (|x[i, j]| / 16 + amax_i / 448 / 1024) (plus f32 and activation
// rounding), and the row gaps of got equal to those of gaps. w: [n, k] row-major, the weight the
// reference multiplied.
void expect_within_fp8_act_bound(const HostMat& got, const HostMat& want, const HostMat& gaps, const HostMat& x,
                                 const std::vector<float>& w, double act_tol, const std::string& what);

// Which harness cases a backend is expected to run (tests/ops/harness_support.cpp). A case is
// named by its op and a variant string naming what decides support: "w=dense bf16" (matmul),
// "w=f16" (rms_norm), "table=f16" (embedding), "cache=bf16" (kv_write, attention), "" (others).
// Every case is expected to run unless listed; the harness fails when a backend refuses a case
// it should run, and when it runs one the table says it refuses (keep the table true).
class SupportTable {
 public:
  struct Refusal {
    ops::OpKind op;
    std::string variant;
    std::string why;  // e.g. "no INT4 kernels on this backend yet (issue 16)"
  };
  SupportTable() = default;
  explicit SupportTable(std::vector<Refusal> refusals) : refusals_(std::move(refusals)) {}
  bool expects(ops::OpKind op, const std::string& variant) const;

 private:
  std::vector<Refusal> refusals_;
};

// A MoE layer's expert weights for the harness's moe_experts and moe_block cases: E experts' gate
// and up [inter, hidden] and down [hidden, inter], then the shared experts' gate_up [2 S, hidden]
// (gate rows, then up rows) and down [hidden, S] (one channel's worth when S is 0), all bf16
// random at scale 0.3, each with a guarded device copy, and views of both copies.
struct ExpertWeights {
  int64_t E = 0, hidden = 0, inter = 0, S = 0;
  std::vector<HostMat> w;  // gate[E], up[E], down[E]
  std::vector<std::unique_ptr<GuardedBuffer>> dw;
  std::vector<ops::WeightView> dviews, hviews;  // of w's device / host copies, in w's order
  HostMat sgu, sdown;
  std::unique_ptr<GuardedBuffer> dsgu, dsdown;
  // q's shared experts (none when S is 0) on the device or the host copies; gate_up: also as one view.
  void set_shared(ops::MoeExpertsParams& q, bool device, bool gate_up) const;
  bool check_guards(const std::string& what) const;
};

// The table of a backend registered under `name` in backends.cpp ("ref", "cpu", "cuda");
// nullptr when it has none (the harness then fails: every backend must declare its support).
const SupportTable* support_table_for(const std::string& name);

// The harness cases of every op (ops/op_list.h) on one backend, checked against ops::ref and
// against the backend's SupportTable. Failures are gtest non-fatal failures naming the case.
class OpCases {
 public:
  OpCases(ops::Backend* backend, const SupportTable* support) : backend_(backend), support_(support) {}

  // One method per op of ops/op_list.h (defined in harness.cpp, harness_attention.cpp;
  // the fused ops' in harness_fused.cpp).
#define FRUGAL_OP_CASES_(Name, method) void method();
  FRUGAL_OPS(FRUGAL_OP_CASES_)
  FRUGAL_FUSED_OPS(FRUGAL_OP_CASES_)
#undef FRUGAL_OP_CASES_
  // Runs every case of op k.
  void run(ops::OpKind k);
  // matmul's cases for the quantized weight schemes (harness_quant.cpp; matmul() calls it).
  void matmul_quant();
  // batched_matmul's cases in MLA's strided layouts, every float dtype (batched_matmul() calls it).
  void batched_matmul_strided();
  // Random expert weights (ExpertWeights), uploaded.
  ExpertWeights expert_weights(int64_t E, int64_t hidden, int64_t inter, int64_t S);

  ops::Backend* backend() const { return backend_; }
  DType act() const { return backend_->activation_dtype(); }
  // Relative tolerance for results written in the activation dtype.
  double act_tol() const { return act() == DType::kF32 ? 1e-4 : 2e-2; }
  // Uploads host bytes into a new guarded device buffer.
  std::unique_ptr<GuardedBuffer> upload(const void* host, size_t nbytes);
  std::unique_ptr<GuardedBuffer> upload(const HostMat& m) { return upload(m.data(), m.bytes.size()); }
  template <typename T>
  std::unique_ptr<GuardedBuffer> upload(const std::vector<T>& v) { return upload(v.data(), v.size() * sizeof(T)); }
  // Downloads a whole buffer into a HostMat shaped like `like`.
  HostMat download(const GuardedBuffer& b, const HostMat& like);
  // Judges a backend call's status against the support table: true when the op ran (compare
  // its results), false when it refused (expectedly, or after a failure was recorded).
  bool ran(const Status& st, ops::OpKind op, const std::string& variant, const std::string& what);
  std::mt19937& rng() { return rng_; }

  int n_ran() const { return n_ran_; }
  int n_refused() const { return n_refused_; }

 private:
  ops::Backend* backend_;
  const SupportTable* support_;
  std::mt19937 rng_{1234};
  int n_ran_ = 0, n_refused_ = 0;
};

class OpHarness : public ::testing::TestWithParam<std::string> {
 public:
  void SetUp() override;
  OpCases& cases() { return *cases_; }

 protected:
  std::unique_ptr<ops::Backend> backend_;
  std::unique_ptr<OpCases> cases_;
};

}  // namespace frugal::testing

#define FRUGAL_INSTANTIATE_OP_HARNESS(prefix, backend_name)                               \
  using ::frugal::testing::OpHarness;                                                     \
  INSTANTIATE_TEST_SUITE_P(prefix, OpHarness,                                             \
                           ::testing::Values(std::string(backend_name)),                  \
                           [](const ::testing::TestParamInfo<std::string>& info) {        \
                             return info.param;                                           \
                           })
