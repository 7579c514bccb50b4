#include "quantize/cuda/cuda_math.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <string>

#include "core/thread_pool.h"
#include "quantize/cuda/kernels.h"
#include "quantize/rtn.h"

namespace frugal::quantize {

namespace {

// A grow-only device buffer.
template <typename T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  bool reserve(size_t want) {
    if (want <= n) return true;
    if (p) cudaFree(p);
    p = nullptr;
    n = 0;
    if (cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(want, 1) * sizeof(T)) != cudaSuccess) return false;
    n = want;
    return true;
  }
};

class CudaMath;

// GPTQ's factor on the GPU, f32 (the column updates are f32 GEMMs).
struct CudaGptqL2 final : GptqL2 {
  DevBuf<float> l2;  // [in, in] row-major; only the strictly lower blocks are read
};

class CudaGptqWork final : public GptqWork {
 public:
  CudaGptqWork(CudaMath& m, std::shared_ptr<CudaGptqL2> l2, int64_t in, int64_t out) : m_(m), l2_(std::move(l2)), in_(in), out_(out) {}
  bool init(const std::vector<float>& wp);
  void rows(int64_t r0, int64_t r1, float* dst) override;
  void update(int64_t i1, int64_t i2, const float* err) override;

 private:
  CudaMath& m_;
  std::shared_ptr<CudaGptqL2> l2_;
  int64_t in_, out_;
  DevBuf<float> wp_, err_;
};

class CudaMath final : public QuantMath {
 public:
  ~CudaMath() override {
    if (solver_) cusolverDnDestroy(solver_);
    if (blas_) cublasDestroy(blas_);
  }
  Status init(int device) {
    if (!cuda_ok(cudaSetDevice(device), "cudaSetDevice")) return status_;
    if (cublasCreate(&blas_) != CUBLAS_STATUS_SUCCESS) return internal_error("frugal quantize --device cuda: cublasCreate failed");
    // Plain f32 (no TF32): results must equal the host's within f32 rounding.
    cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH);
    if (cusolverDnCreate(&solver_) != CUSOLVER_STATUS_SUCCESS) return internal_error("frugal quantize --device cuda: cusolverDnCreate failed");
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, device);
    name_ = std::string("cuda:") + std::to_string(device) + " (" + prop.name + ")";
    return {};
  }

  std::string name() const override { return name_; }
  Status status() const override { return status_; }

  bool cuda_ok(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    if (status_.is_ok()) status_ = internal_error(std::string("frugal quantize --device cuda: ") + what + ": " + cudaGetErrorString(e));
    return false;
  }
  bool blas_ok(cublasStatus_t e, const char* what) {
    if (e == CUBLAS_STATUS_SUCCESS) return true;
    if (status_.is_ok()) status_ = internal_error(std::string("frugal quantize --device cuda: ") + what + " failed (cuBLAS status " + std::to_string(static_cast<int>(e)) + ")");
    return false;
  }
  bool alloc_ok(bool ok, const char* what, size_t bytes) {
    if (ok) return true;
    cudaGetLastError();
    if (status_.is_ok()) status_ = internal_error(std::string("frugal quantize --device cuda: out of device memory for ") + what + " (" + std::to_string(bytes >> 20) + " MiB)");
    return false;
  }
  bool up(void* d, const void* h, size_t bytes) { return cuda_ok(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), "upload"); }
  bool down(void* h, const void* d, size_t bytes) { return cuda_ok(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), "download"); }

  // y [t, out] = x [t, in] w^T on device pointers (column-major view: y^T = w x^T).
  bool gemm_nt(const float* x, int64_t t, const float* w, int64_t out, int64_t in, float* y) {
    const float one = 1.0f, zero = 0.0f;
    return blas_ok(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(t), static_cast<int>(in), &one, w,
                               static_cast<int>(in), x, static_cast<int>(in), &zero, y, static_cast<int>(out)),
                   "cublasSgemm (linear)");
  }

  void linear(const float* x, int64_t t, const float* w, const float* b, int64_t out, int64_t in, float* y) override {
    std::fill(y, y + t * out, 0.0f);
    if (!status_.is_ok()) return;
    if (!alloc_ok(bx_.reserve(static_cast<size_t>(t * in)), "activations", t * in * 4) ||
        !alloc_ok(bw_.reserve(static_cast<size_t>(out * in)), "a weight", out * in * 4) ||
        !alloc_ok(by_.reserve(static_cast<size_t>(t * out)), "outputs", t * out * 4))
      return;
    if (!up(bx_.p, x, t * in * 4) || !up(bw_.p, w, out * in * 4)) return;
    if (!gemm_nt(bx_.p, t, bw_.p, out, in, by_.p)) return;
    if (!down(y, by_.p, t * out * 4)) return;
    if (b)
      for (int64_t r = 0; r < t; ++r)
        for (int64_t j = 0; j < out; ++j) y[r * out + j] += b[j];
  }

  // H = 2/n X^T X of x [n, k] into bh_ (k x k, symmetric) on the GPU.
  bool hessian_device(const float* x, int64_t n, int64_t k) {
    if (!status_.is_ok()) return false;
    DevBuf<double> xd;
    if (!alloc_ok(bx_.reserve(static_cast<size_t>(n * k)), "activations", n * k * 4) ||
        !alloc_ok(xd.reserve(static_cast<size_t>(n * k)), "activations (f64)", n * k * 8) ||
        !alloc_ok(bh_.reserve(static_cast<size_t>(k * k)), "the Hessian", k * k * 8))
      return false;
    if (!up(bx_.p, x, n * k * 4)) return false;
    cuda::launch_f32_to_f64(bx_.p, xd.p, n * k, nullptr);
    // Column-major, x is X^T [k, n]: H = X^T X = A A^T.
    const double alpha = 2.0 / static_cast<double>(n), beta = 0.0;
    return blas_ok(cublasDgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(k), static_cast<int>(k), static_cast<int>(n), &alpha, xd.p,
                               static_cast<int>(k), xd.p, static_cast<int>(k), &beta, bh_.p, static_cast<int>(k)),
                   "cublasDgemm (Hessian)");
  }

  std::vector<double> hessian(const float* x, int64_t n, int64_t k) override {
    std::vector<double> h(static_cast<size_t>(k * k), 0.0);
    if (hessian_device(x, n, k)) down(h.data(), bh_.p, k * k * 8);
    return h;
  }

  // GPTQ's factor with the Hessian in bh_: only diag(H), the order and the factor's diagonal
  // blocks cross PCIe (the 18944-wide Hessian of a 7B down_proj is 2.9 GB in f64).
  int factor_from_device_hessian(int64_t k, double damp_percent, bool act_order, int64_t block, GptqFactor* f) {
    if (!status_.is_ok()) return 1;
    f->in = k;
    f->block = block;
    std::vector<double> diag(static_cast<size_t>(k));
    if (!cuda_ok(cudaMemcpy2D(diag.data(), sizeof(double), bh_.p, (k + 1) * sizeof(double), sizeof(double), k, cudaMemcpyDeviceToHost),
                 "download (Hessian diagonal)"))
      return 1;
    double damp = 0;
    gptq_order(diag, act_order, damp_percent, &f->perm, &f->dead, &damp);
    DevBuf<int64_t> perm;
    DevBuf<uint8_t> dead;
    if (!alloc_ok(perm.reserve(static_cast<size_t>(k)), "GPTQ order", k * 8) || !alloc_ok(dead.reserve(static_cast<size_t>(k)), "GPTQ order", k) ||
        !alloc_ok(bd_.reserve(static_cast<size_t>(k * k)), "the Hessian", k * k * 8))
      return 1;
    if (!up(perm.p, f->perm.data(), k * 8) || !up(dead.p, f->dead.data(), k)) return 1;
    cuda::launch_gptq_permute_damp(bh_.p, bd_.p, perm.p, dead.p, damp, k, nullptr);
    if (!cuda_ok(cudaGetLastError(), "GPTQ permute kernel")) return 1;
    const int rc = factor_device(bd_.p, k);
    if (rc != 0) return rc;
    // The diagonal blocks, then the upper triangle of each zeroed (the factorisation leaves the
    // input there).
    f->diag.resize(static_cast<size_t>(k * block));
    for (int64_t i1 = 0; i1 < k; i1 += block) {
      const int64_t sz = std::min(block, k - i1);
      double* dst = f->diag.data() + i1 * block;
      if (!cuda_ok(cudaMemcpy2D(dst, sz * sizeof(double), bd_.p + i1 * k + i1, k * sizeof(double), sz * sizeof(double), sz,
                                cudaMemcpyDeviceToHost),
                   "download (GPTQ factor blocks)"))
        return 2;
      for (int64_t a = 0; a < sz; ++a)
        for (int64_t c = a + 1; c < sz; ++c) dst[a * sz + c] = 0.0;
    }
    auto l2 = std::make_shared<CudaGptqL2>();
    if (!alloc_ok(l2->l2.reserve(static_cast<size_t>(k * k)), "GPTQ factor", k * k * 4)) return 2;
    cuda::launch_f64_to_f32(bd_.p, l2->l2.p, k * k, nullptr);
    if (!cuda_ok(cudaGetLastError(), "GPTQ factor conversion")) return 2;
    f->l2 = std::move(l2);
    return 0;
  }

  int gptq_factor(const float* x, int64_t n, int64_t k, double damp_percent, bool act_order, int64_t block, GptqFactor* f) override {
    if (!hessian_device(x, n, k)) return 1;
    return factor_from_device_hessian(k, damp_percent, act_order, block, f);
  }

  int gptq_factor_from_hessian(std::vector<double> h, int64_t k, double damp_percent, bool act_order, int64_t block,
                               GptqFactor* f) override {
    if (!status_.is_ok()) return 1;
    if (!alloc_ok(bh_.reserve(static_cast<size_t>(k * k)), "the Hessian", k * k * 8) || !up(bh_.p, h.data(), k * k * 8)) return 1;
    return factor_from_device_hessian(k, damp_percent, act_order, block, f);
  }

  int inverse_cholesky(std::vector<double>& a, int64_t k) override {
    if (!status_.is_ok()) return 1;
    if (!alloc_ok(bd_.reserve(static_cast<size_t>(k * k)), "the Hessian", k * k * 8)) return 1;
    if (!up(bd_.p, a.data(), k * k * 8)) return 1;
    const int rc = factor_device(bd_.p, k);
    if (rc != 0) return rc;
    if (!down(a.data(), bd_.p, k * k * 8)) return 2;
    ThreadPool::global().parallel_for(k, 64, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) std::fill(a.begin() + i * k + i + 1, a.begin() + (i + 1) * k, 0.0);
    });
    return 0;
  }

  // In place on the device matrix a [k, k] (symmetric): L2 in its row-major lower triangle
  // (the upper keeps leftovers). 0, 1 (a not positive definite), 2 (a^-1 not).
  int factor_device(double* a, int64_t k) {
    DevBuf<int> info;
    if (!alloc_ok(info.reserve(1), "info", 4)) return 1;
    // Row-major lower = column-major upper: potrf(UPPER) leaves L (L L^T = a) in the row-major
    // lower triangle, potri(UPPER) a^-1 there, potrf(UPPER) again L2 (L2 L2^T = a^-1).
    const cublasFillMode_t up_fill = CUBLAS_FILL_MODE_UPPER;
    const int n = static_cast<int>(k);
    int lw1 = 0, lw2 = 0;
    cusolverDnDpotrf_bufferSize(solver_, up_fill, n, a, n, &lw1);
    cusolverDnDpotri_bufferSize(solver_, up_fill, n, a, n, &lw2);
    DevBuf<double> work;
    if (!alloc_ok(work.reserve(static_cast<size_t>(std::max(lw1, lw2))), "cuSOLVER workspace", static_cast<size_t>(std::max(lw1, lw2)) * 8)) return 1;
    auto step = [&](cusolverStatus_t st, const char* what) -> int {
      if (st != CUSOLVER_STATUS_SUCCESS) {
        if (status_.is_ok()) status_ = internal_error(std::string("frugal quantize --device cuda: ") + what + " failed (cuSOLVER status " + std::to_string(static_cast<int>(st)) + ")");
        return -1;
      }
      int h_info = 0;
      if (!down(&h_info, info.p, sizeof(int))) return -1;
      return h_info;
    };
    int r = step(cusolverDnDpotrf(solver_, up_fill, n, a, n, work.p, lw1, info.p), "cusolverDnDpotrf");
    if (r != 0) return 1;
    r = step(cusolverDnDpotri(solver_, up_fill, n, a, n, work.p, lw2, info.p), "cusolverDnDpotri");
    if (r != 0) return 2;
    r = step(cusolverDnDpotrf(solver_, up_fill, n, a, n, work.p, lw1, info.p), "cusolverDnDpotrf (inverse)");
    if (r != 0) return 2;
    return 0;
  }

  std::unique_ptr<GptqWork> gptq_begin(std::vector<float> wp, const GptqFactor& f, int64_t out) override {
    auto l2 = std::dynamic_pointer_cast<CudaGptqL2>(f.l2);
    if (!l2 && status_.is_ok()) status_ = internal_error("frugal quantize --device cuda: a GPTQ factor of another implementation");
    auto w = std::make_unique<CudaGptqWork>(*this, std::move(l2), f.in, out);
    w->init(wp);
    return w;
  }

  std::vector<double> awq_losses(const std::vector<const float*>& ws, const std::vector<int64_t>& outs, int64_t in,
                                 const float* xs, int64_t ns, const std::vector<std::vector<float>>& scales,
                                 const IntSpec& spec) override {
    if (spec.scheme != IntScheme::kAwq || spec.group <= 0 || in % spec.group != 0)
      return host_math().awq_losses(ws, outs, in, xs, ns, scales, spec);  // the kernels do AutoAWQ's rule only
    std::vector<double> losses(scales.size(), 0.0);
    if (!status_.is_ok()) return losses;
    const int32_t maxq = spec_qmax(spec);
    int64_t max_out = 0;
    for (int64_t o : outs) max_out = std::max(max_out, o);
    std::vector<DevBuf<float>> w(ws.size()), ref(ws.size());
    DevBuf<float> tmp, y, s;
    DevBuf<double> acc;
    if (!alloc_ok(bx_.reserve(static_cast<size_t>(ns * in)), "activations", ns * in * 4) ||
        !alloc_ok(tmp.reserve(static_cast<size_t>(max_out * in)), "a scaled weight", max_out * in * 4) ||
        !alloc_ok(y.reserve(static_cast<size_t>(ns * max_out)), "outputs", ns * max_out * 4) ||
        !alloc_ok(s.reserve(static_cast<size_t>(in)), "scales", in * 4) ||
        !alloc_ok(acc.reserve(scales.size()), "losses", scales.size() * 8))
      return losses;
    if (!up(bx_.p, xs, ns * in * 4)) return losses;
    for (size_t i = 0; i < ws.size(); ++i) {
      if (!alloc_ok(w[i].reserve(static_cast<size_t>(outs[i] * in)), "a weight", outs[i] * in * 4) ||
          !alloc_ok(ref[i].reserve(static_cast<size_t>(ns * outs[i])), "outputs", ns * outs[i] * 4))
        return losses;
      if (!up(w[i].p, ws[i], outs[i] * in * 4) || !gemm_nt(bx_.p, ns, w[i].p, outs[i], in, ref[i].p)) return losses;
    }
    if (!cuda_ok(cudaMemset(acc.p, 0, scales.size() * 8), "cudaMemset")) return losses;
    for (size_t c = 0; c < scales.size(); ++c) {
      if (!up(s.p, scales[c].data(), in * 4)) return losses;
      for (size_t i = 0; i < ws.size(); ++i) {
        cuda::launch_awq_fake_quant(w[i].p, s.p, tmp.p, outs[i], in, spec.group, maxq, nullptr);
        if (!gemm_nt(bx_.p, ns, tmp.p, outs[i], in, y.p)) return losses;
        cuda::launch_sq_diff_sum(y.p, ref[i].p, ns * outs[i], acc.p + c, nullptr);
      }
    }
    if (!cuda_ok(cudaGetLastError(), "AWQ search kernels")) return losses;
    down(losses.data(), acc.p, scales.size() * 8);
    return losses;
  }

  void awq_clip(float* w, int64_t out, int64_t in, const float* xs, int64_t ns, const IntSpec& spec) override {
    const int64_t group = spec.group <= 0 ? in : spec.group;
    if (spec.scheme != IntScheme::kAwq || group > 4096 || in % group != 0 || ns > 1024) {
      host_math().awq_clip(w, out, in, xs, ns, spec);
      return;
    }
    if (!status_.is_ok()) return;
    if (!alloc_ok(bx_.reserve(static_cast<size_t>(ns * in)), "activations", ns * in * 4) ||
        !alloc_ok(bw_.reserve(static_cast<size_t>(out * in)), "a weight", out * in * 4))
      return;
    if (!up(bx_.p, xs, ns * in * 4) || !up(bw_.p, w, out * in * 4)) return;
    cuda::launch_awq_clip(bw_.p, out, in, group, spec_qmax(spec), bx_.p, ns, nullptr);
    if (!cuda_ok(cudaGetLastError(), "AWQ clip kernel")) return;
    down(w, bw_.p, out * in * 4);
  }

  cublasHandle_t blas() const { return blas_; }

 private:
  std::string name_ = "cuda";
  Status status_;
  cublasHandle_t blas_ = nullptr;
  cusolverDnHandle_t solver_ = nullptr;
  DevBuf<float> bx_, bw_, by_;
  DevBuf<double> bd_, bh_;
};

bool CudaGptqWork::init(const std::vector<float>& wp) {
  if (!m_.status().is_ok() || !l2_) return false;
  if (!m_.alloc_ok(wp_.reserve(static_cast<size_t>(in_ * out_)), "GPTQ weight", in_ * out_ * 4) ||
      !m_.alloc_ok(err_.reserve(static_cast<size_t>(in_ * out_)), "GPTQ errors", in_ * out_ * 4))
    return false;
  return m_.up(wp_.p, wp.data(), in_ * out_ * 4);
}

void CudaGptqWork::rows(int64_t r0, int64_t r1, float* dst) {
  if (!m_.status().is_ok()) {
    std::fill(dst, dst + (r1 - r0) * out_, 0.0f);
    return;
  }
  m_.down(dst, wp_.p + r0 * out_, (r1 - r0) * out_ * 4);
}

void CudaGptqWork::update(int64_t i1, int64_t i2, const float* err) {
  if (!m_.status().is_ok() || !l2_) return;
  const int64_t bs = i2 - i1;
  if (!m_.up(err_.p, err, bs * out_ * 4)) return;
  // Column-major: wp^T[:, i2:] (out x (in-i2), ld out) -= err^T (out x bs, ld out) . B, B =
  // L2[i2:, i1:i2]^T (bs x (in-i2)), which is the row-major L2 read column-major at ld in.
  const float minus = -1.0f, one = 1.0f;
  m_.blas_ok(cublasSgemm(m_.blas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(out_), static_cast<int>(in_ - i2), static_cast<int>(bs), &minus,
                         err_.p, static_cast<int>(out_), l2_->l2.p + i2 * in_ + i1, static_cast<int>(in_), &one, wp_.p + i2 * out_,
                         static_cast<int>(out_)),
             "cublasSgemm (GPTQ update)");
}

}  // namespace

bool cuda_quant_device_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

Result<std::unique_ptr<QuantMath>> make_cuda_quant_math(int device) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    return unsupported(std::string("--device cuda: no usable CUDA device (") + (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + ")");
  }
  if (device < 0 || device >= n) return invalid_argument("--device cuda: device " + std::to_string(device) + " of " + std::to_string(n));
  auto m = std::make_unique<CudaMath>();
  FRUGAL_RETURN_IF_ERROR(m->init(device));
  return std::unique_ptr<QuantMath>(std::move(m));
}

}  // namespace frugal::quantize
