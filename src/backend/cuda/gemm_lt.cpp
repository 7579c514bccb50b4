#include "backend/cuda/gemm_lt.h"

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace frugal::cuda {
namespace {

bool lt_type(DType t, cudaDataType_t* out) {
  switch (t) {
    case DType::kBF16: *out = CUDA_R_16BF; return true;
    case DType::kF16: *out = CUDA_R_16F; return true;
    case DType::kF32: *out = CUDA_R_32F; return true;
    default: return false;
  }
}

Status lt_error(const char* what, cublasStatus_t st) {
  return internal_error(std::string("cuBLASLt ") + what + " failed: status " + std::to_string(static_cast<int>(st)));
}

// The largest power of two up to 256 dividing a strided operand's pointer, leading dimension and
// batch stride (in bytes): every batch entry's start and rows are aligned to it.
uint32_t alignment(const void* ptr, int64_t ld_bytes, int64_t stride_bytes) {
  const uint64_t v = reinterpret_cast<uintptr_t>(ptr) | static_cast<uint64_t>(ld_bytes) |
                     static_cast<uint64_t>(stride_bytes) | 256u;
  return static_cast<uint32_t>(v & (~v + 1));
}

#define FRUGAL_LT(what, expr)                                  \
  do {                                                         \
    cublasStatus_t _st = (expr);                               \
    if (_st != CUBLAS_STATUS_SUCCESS) return lt_error(what, _st); \
  } while (0)

}  // namespace

struct LtGemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (op) cublasLtMatmulDescDestroy(op);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
  }
};

Result<std::unique_ptr<LtGemm>> LtGemm::create(size_t workspace_bytes) {
  std::unique_ptr<LtGemm> g(new LtGemm());
  FRUGAL_LT("create", cublasLtCreate(&g->handle_));
  if (cudaMalloc(&g->workspace_, workspace_bytes) != cudaSuccess)
    return resource_exhausted("cuBLASLt workspace of " + std::to_string(workspace_bytes) + " bytes");
  g->workspace_bytes_ = workspace_bytes;
  const char* fast = std::getenv("FRUGAL_FP8_FAST_ACCUM");
  g->fp8_fast_accum_ = !(fast && std::strcmp(fast, "0") == 0);
  return g;
}

LtGemm::~LtGemm() {
  plans_.clear();
  fp8_plans_.clear();
  batched_plans_.clear();
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

bool LtGemm::supports(const ops::MatmulParams& p) {
  cudaDataType_t t;
  if (p.w.format.scheme != ops::WeightScheme::kDense) return false;  // cuBLASLt takes plain matrices
  if (p.x_dtype != p.w.format.dtype || !lt_type(p.x_dtype, &t)) return false;
  if (p.y_dtype != p.x_dtype && p.y_dtype != DType::kF32) return false;
  // A bias of another dtype than y is the caller's to add (run() fuses only bias_dtype == y).
  if (p.bias && p.bias_dtype != p.y_dtype) return false;
  return p.m > 0 && p.n > 0 && p.k > 0;
}

// The descriptor every plan starts from: fp32 compute, A transposed (the "TN" layout FP8 needs
// too), and the bias epilogue when bias_t is given.
Status LtGemm::start_plan(Plan* plan, const cudaDataType_t* bias_t) {
  FRUGAL_LT("matmul desc", cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  FRUGAL_LT("transa", cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  FRUGAL_LT("transb", cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  if (bias_t) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    FRUGAL_LT("epilogue", cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    FRUGAL_LT("bias type", cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_t, sizeof(*bias_t)));
  }
  return Status::ok();
}

// The heuristic's first algorithm within the workspace, into plan->algo; false when none.
bool LtGemm::pick_algo(Plan* plan, const Alignment& align) {
  cublasLtMatmulPreference_t pref;
  if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return false;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                       sizeof(workspace_bytes_));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align.a, sizeof(align.a));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align.b, sizeof(align.b));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align.c, sizeof(align.c));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align.c, sizeof(align.c));
  cublasLtMatmulHeuristicResult_t result{};
  int n_results = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->c, plan->c,
                                                           pref, 1, &result, &n_results);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || n_results == 0) return false;
  plan->algo = result.algo;
  return true;
}

// Row-major y[m, n] = x[m, k] w[n, k]^T is column-major y^T[n, m] = w^T... i.e. with A = w
// (column-major k x n, transposed) and B = x (column-major k x m): D (n x m, ld_y) = op(A) B.
Result<LtGemm::Plan*> LtGemm::plan_for(const ops::MatmulParams& p) {
  Key key{p.m, p.n, p.k, p.ld_x, p.ld_y, static_cast<int>(p.x_dtype), static_cast<int>(p.y_dtype),
          p.bias ? static_cast<int>(p.bias_dtype) : -1, p.accumulate};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();

  cudaDataType_t in_t, out_t;
  lt_type(p.x_dtype, &in_t);
  lt_type(p.y_dtype, &out_t);
  auto plan = std::make_unique<Plan>();
  cudaDataType_t bias_t = CUDA_R_32F;
  if (p.bias) lt_type(p.bias_dtype, &bias_t);
  FRUGAL_RETURN_IF_ERROR(start_plan(plan.get(), p.bias ? &bias_t : nullptr));
  FRUGAL_LT("layout a", cublasLtMatrixLayoutCreate(&plan->a, in_t, static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.n), p.k));
  FRUGAL_LT("layout b", cublasLtMatrixLayoutCreate(&plan->b, in_t, static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.m), p.ld_x));
  FRUGAL_LT("layout c", cublasLtMatrixLayoutCreate(&plan->c, out_t, static_cast<uint64_t>(p.n), static_cast<uint64_t>(p.m), p.ld_y));
  if (!pick_algo(plan.get(), Alignment{}))
    return unsupported("cuBLASLt has no algorithm for matmul m=" + std::to_string(p.m) + " n=" +
                       std::to_string(p.n) + " k=" + std::to_string(p.k));
  Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

Status LtGemm::run(const ops::MatmulParams& p, cudaStream_t stream) {
  FRUGAL_ASSIGN_OR_RETURN(Plan * plan, plan_for(p));
  if (p.bias) {
    FRUGAL_LT("bias pointer", cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                             &p.bias, sizeof(p.bias)));
  }
  const float alpha = 1.f, beta = p.accumulate ? 1.f : 0.f;
  // NOT_SUPPORTED (e.g. operands less aligned than the plan's algorithm assumes): kUnsupported,
  // so the caller takes its generic kernel instead of failing the step.
  const cublasStatus_t st = cublasLtMatmul(handle_, plan->op, &alpha, p.w.data, plan->a, p.x, plan->b, &beta, p.y,
                                           plan->c, p.y, plan->c, &plan->algo, workspace_, workspace_bytes_, stream);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return unsupported("cuBLASLt matmul: not supported here");
  if (st != CUBLAS_STATUS_SUCCESS) return lt_error("matmul", st);
  return Status::ok();
}

bool LtGemm::supports(const ops::BatchedMatmulParams& p) {
  cudaDataType_t t;
  if (p.x_dtype != p.w_dtype || !lt_type(p.x_dtype, &t)) return false;
  if (p.y_dtype != p.x_dtype && p.y_dtype != DType::kF32) return false;
  return p.batch > 0 && p.batch <= INT32_MAX && p.m > 0 && p.n > 0 && p.k > 0 && p.stride_x >= 0 && p.stride_w >= 0 &&
         p.stride_y >= 0;
}

// plan_for's layouts (A = w, B = x, D = y column-major) with a batch count and each operand's
// batch stride in elements. Batch entries with stride_x < ld_x (heads side by side in one row,
// as MLA lays out q) are ordinary strided batches to cuBLASLt: a layout's ld and its batch
// stride are independent.
Result<LtGemm::Plan*> LtGemm::plan_batched(const ops::BatchedMatmulParams& p, const BatchedKey& key) {
  if (auto it = batched_plans_.find(key); it != batched_plans_.end()) {
    if (!it->second) return unsupported("cuBLASLt: no batched algorithm (cached)");
    return it->second.get();
  }
  cudaDataType_t in_t, out_t;
  lt_type(p.x_dtype, &in_t);
  lt_type(p.y_dtype, &out_t);
  auto plan = std::make_unique<Plan>();
  FRUGAL_RETURN_IF_ERROR(start_plan(plan.get(), nullptr));
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  FRUGAL_LT("layout a", cublasLtMatrixLayoutCreate(&plan->a, in_t, u(p.k), u(p.n), p.k));
  FRUGAL_LT("layout b", cublasLtMatrixLayoutCreate(&plan->b, in_t, u(p.k), u(p.m), p.ld_x));
  FRUGAL_LT("layout c", cublasLtMatrixLayoutCreate(&plan->c, out_t, u(p.n), u(p.m), p.ld_y));
  const int32_t count = static_cast<int32_t>(p.batch);
  const std::pair<cublasLtMatrixLayout_t, int64_t> strided[] = {{plan->a, p.stride_w}, {plan->b, p.stride_x},
                                                                {plan->c, p.stride_y}};
  for (const auto& [layout, stride] : strided) {
    FRUGAL_LT("batch count",
              cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    FRUGAL_LT("batch stride", cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                               &stride, sizeof(stride)));
  }
  if (!pick_algo(plan.get(), Alignment{.a = key.align_w, .b = key.align_x, .c = key.align_y})) {
    batched_plans_.emplace(key, nullptr);  // the heuristic's answer does not change: ask once
    return unsupported("cuBLASLt has no batched algorithm for batch=" + std::to_string(p.batch) + " m=" +
                       std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k));
  }
  Plan* raw = plan.get();
  batched_plans_.emplace(key, std::move(plan));
  return raw;
}

Status LtGemm::run_batched(const ops::BatchedMatmulParams& p, cudaStream_t stream) {
  if (!supports(p)) return unsupported("cuBLASLt batched: dtypes or strides");
  const int64_t xb = dtype_bytes(p.x_dtype, 1), yb = dtype_bytes(p.y_dtype, 1);
  const BatchedKey key{.m = p.m, .n = p.n, .k = p.k, .ld_x = p.ld_x, .ld_y = p.ld_y, .stride_x = p.stride_x,
                       .stride_w = p.stride_w, .stride_y = p.stride_y, .batch = p.batch,
                       .x_dtype = static_cast<int>(p.x_dtype), .y_dtype = static_cast<int>(p.y_dtype),
                       .align_w = alignment(p.w, p.k * xb, p.stride_w * xb),
                       .align_x = alignment(p.x, p.ld_x * xb, p.stride_x * xb),
                       .align_y = alignment(p.y, p.ld_y * yb, p.stride_y * yb)};
  FRUGAL_ASSIGN_OR_RETURN(Plan * plan, plan_batched(p, key));
  const float alpha = 1.f, beta = 0.f;
  const cublasStatus_t st = cublasLtMatmul(handle_, plan->op, &alpha, p.w, plan->a, p.x, plan->b, &beta, p.y, plan->c,
                                           p.y, plan->c, &plan->algo, workspace_, workspace_bytes_, stream);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return unsupported("cuBLASLt batched matmul: not supported here");
  if (st != CUBLAS_STATUS_SUCCESS) return lt_error("batched matmul", st);
  return Status::ok();
}

Result<LtGemm::Plan*> LtGemm::plan_fp8(const Fp8Gemm& g) {
  // Fast accumulation for row scales only: cuBLASLt 13 has no FP8 algorithm with it for block scales.
  const bool fast = fp8_fast_accum_ && g.scales == Fp8Gemm::Scales::kRow;
  const Fp8Key key{g.m, g.n, g.k, g.ld_w, g.ld_x, g.ld_y, static_cast<int>(g.scales), g.bias != nullptr, g.accumulate, fast};
  auto it = fp8_plans_.find(key);
  if (it != fp8_plans_.end()) return it->second.get();
  auto plan = std::make_unique<Plan>();
  cudaDataType_t bias_t = CUDA_R_16BF;
  FRUGAL_RETURN_IF_ERROR(start_plan(plan.get(), g.bias ? &bias_t : nullptr));
  const bool block = g.scales == Fp8Gemm::Scales::kBlock128;
  const int32_t a_mode = block ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  const int32_t b_mode = block ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  if (cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode)) !=
          CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode)) !=
          CUBLAS_STATUS_SUCCESS)
    return unsupported("cuBLASLt: this version has no FP8 scale modes");
  if (fast) {
    const int8_t on = 1;
    FRUGAL_LT("fast accumulation", cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on, sizeof(on)));
  }
  // The heuristic finds no algorithm for a scale mode whose pointer is unset: set this call's
  // (run_fp8 sets them again every call).
  FRUGAL_LT("a scale", cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g.sw, sizeof(g.sw)));
  FRUGAL_LT("b scale", cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g.sx, sizeof(g.sx)));
  FRUGAL_LT("layout a", cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_8F_E4M3, static_cast<uint64_t>(g.k), static_cast<uint64_t>(g.n), g.ld_w));
  FRUGAL_LT("layout b", cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_8F_E4M3, static_cast<uint64_t>(g.k), static_cast<uint64_t>(g.m), g.ld_x));
  FRUGAL_LT("layout c", cublasLtMatrixLayoutCreate(&plan->c, CUDA_R_16BF, static_cast<uint64_t>(g.n), static_cast<uint64_t>(g.m), g.ld_y));
  if (!pick_algo(plan.get(), Alignment{}))
    return unsupported("cuBLASLt has no FP8 algorithm for m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) +
                       " k=" + std::to_string(g.k) + (block ? " (128x128 block scales)" : " (row scales)"));
  Plan* raw = plan.get();
  fp8_plans_.emplace(key, std::move(plan));
  return raw;
}

Status LtGemm::run_fp8(const Fp8Gemm& g, cudaStream_t stream) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.k % 16 != 0 || g.ld_w % 16 != 0 || g.ld_x % 16 != 0)
    return unsupported("cuBLASLt FP8: k and leading dimensions must be multiples of 16");
  FRUGAL_ASSIGN_OR_RETURN(Plan * plan, plan_fp8(g));
  FRUGAL_LT("a scale", cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g.sw, sizeof(g.sw)));
  FRUGAL_LT("b scale", cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g.sx, sizeof(g.sx)));
  if (g.bias)
    FRUGAL_LT("bias pointer", cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  const float alpha = 1.f, beta = g.accumulate ? 1.f : 0.f;
  const cublasStatus_t st = cublasLtMatmul(handle_, plan->op, &alpha, g.w, plan->a, g.x, plan->b, &beta, g.y, plan->c,
                                           g.y, plan->c, &plan->algo, workspace_, workspace_bytes_, stream);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return unsupported("cuBLASLt FP8 matmul: not supported here");
  if (st != CUBLAS_STATUS_SUCCESS) return lt_error("fp8 matmul", st);
  return Status::ok();
}

}  // namespace frugal::cuda
