// host_math(): the QuantMath primitives as threaded loops on the host (f32 products, f64
// Hessians and factorisations). The reference the CUDA implementation is compared against.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>

#include "core/thread_pool.h"
#include "quantize/host_layer.h"
#include "quantize/math.h"
#include "quantize/rtn.h"

namespace frugal::quantize {

namespace {

// In-place lower Cholesky factor of the k x k matrix a (row-major); false if not positive definite.
bool cholesky_lower(std::vector<double>& a, int64_t k) {
  for (int64_t j = 0; j < k; ++j) {
    double d = a[j * k + j];
    for (int64_t p = 0; p < j; ++p) d -= a[j * k + p] * a[j * k + p];
    if (!(d > 0)) return false;
    const double l = std::sqrt(d);
    a[j * k + j] = l;
    ThreadPool::global().parallel_for(k - j - 1, 32, [&](int64_t r0, int64_t r1) {
      for (int64_t i = j + 1 + r0; i < j + 1 + r1; ++i) {
        double s = a[i * k + j];
        for (int64_t p = 0; p < j; ++p) s -= a[i * k + p] * a[j * k + p];
        a[i * k + j] = s / l;
      }
    });
  }
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = i + 1; j < k; ++j) a[i * k + j] = 0;
  return true;
}

// Transposed inverse of a lower triangular matrix: inv_t[c][p] = (L^-1)[p][c] (upper), so the
// solves and the products below read rows, not strided columns.
std::vector<double> invert_lower_transposed(const std::vector<double>& l, int64_t k) {
  std::vector<double> inv_t(static_cast<size_t>(k * k), 0.0);
  ThreadPool::global().parallel_for(k, 8, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {  // column c of L^-1: solve L x = e_c
      double* x = inv_t.data() + c * k;
      x[c] = 1.0 / l[c * k + c];
      for (int64_t i = c + 1; i < k; ++i) {
        const double* li = l.data() + i * k;
        double s = 0;
        for (int64_t p = c; p < i; ++p) s += li[p] * x[p];
        x[i] = -s / li[i];
      }
    }
  });
  return inv_t;
}

class HostGptqWork final : public GptqWork {
 public:
  HostGptqWork(std::vector<float> wp, std::shared_ptr<HostGptqL2> l2, int64_t in, int64_t out)
      : wp_(std::move(wp)), hold_(std::move(l2)), l2_(hold_->l2), in_(in), out_(out) {}
  void rows(int64_t r0, int64_t r1, float* dst) override {
    std::copy(wp_.begin() + r0 * out_, wp_.begin() + r1 * out_, dst);
  }
  void update(int64_t i1, int64_t i2, const float* err) override {
    // The block's rows are final once quantized; only later rows change.
    ThreadPool::global().parallel_for(in_ - i2, 4, [&](int64_t a0, int64_t a1) {
      for (int64_t jj = i2 + a0; jj < i2 + a1; ++jj) {
        float* row = wp_.data() + jj * out_;
        for (int64_t j = i1; j < i2; ++j) {
          const float u = static_cast<float>(l2_[jj * in_ + j]);
          const float* e = err + (j - i1) * out_;
          for (int64_t r = 0; r < out_; ++r) row[r] -= e[r] * u;
        }
      }
    });
  }

 private:
  std::vector<float> wp_;
  std::shared_ptr<HostGptqL2> hold_;
  const std::vector<double>& l2_;
  int64_t in_, out_;
};

class HostMath final : public QuantMath {
 public:
  std::string name() const override { return "host"; }

  void linear(const float* x, int64_t t, const float* wt, const float* bias, int64_t n, int64_t k, float* y) override {
    // Four tokens per pass over a weight row: each weight load serves four dot products.
    ThreadPool::global().parallel_for(n, 8, [&](int64_t n0, int64_t n1) {
      for (int64_t j = n0; j < n1; ++j) {
        const float* w = wt + j * k;
        const float b = bias ? bias[j] : 0.0f;
        int64_t r = 0;
        for (; r + 4 <= t; r += 4) {
          const float* x0 = x + r * k;
          const float* x1 = x0 + k;
          const float* x2 = x1 + k;
          const float* x3 = x2 + k;
          float a0[8] = {}, a1[8] = {}, a2[8] = {}, a3[8] = {};
          int64_t i = 0;
          for (; i + 8 <= k; i += 8)
            for (int u = 0; u < 8; ++u) {
              const float wv = w[i + u];
              a0[u] += x0[i + u] * wv;
              a1[u] += x1[i + u] * wv;
              a2[u] += x2[i + u] * wv;
              a3[u] += x3[i + u] * wv;
            }
          float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          for (int u = 0; u < 8; ++u) {
            s0 += a0[u];
            s1 += a1[u];
            s2 += a2[u];
            s3 += a3[u];
          }
          for (; i < k; ++i) {
            s0 += x0[i] * w[i];
            s1 += x1[i] * w[i];
            s2 += x2[i] * w[i];
            s3 += x3[i] * w[i];
          }
          y[r * n + j] = s0 + b;
          y[(r + 1) * n + j] = s1 + b;
          y[(r + 2) * n + j] = s2 + b;
          y[(r + 3) * n + j] = s3 + b;
        }
        for (; r < t; ++r) y[r * n + j] = dot_f32(x + r * k, w, k) + b;
      }
    });
  }

  std::vector<double> hessian(const float* x, int64_t n, int64_t k) override {
    std::vector<float> xt(static_cast<size_t>(k * n));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < k; ++j) xt[j * n + t] = x[t * k + j];
    std::vector<double> h(static_cast<size_t>(k * k));
    const double f = 2.0 / static_cast<double>(n);
    ThreadPool::global().parallel_for(k, 4, [&](int64_t a0, int64_t a1) {
      for (int64_t a = a0; a < a1; ++a) {
        const float* xa = xt.data() + a * n;
        for (int64_t b = 0; b <= a; ++b) {
          const float* xb = xt.data() + b * n;
          double s = 0;
          float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          int64_t t = 0;
          for (; t + 8 <= n; t += 8)
            for (int u = 0; u < 8; ++u) acc[u] += xa[t + u] * xb[t + u];
          for (int u = 0; u < 8; ++u) s += acc[u];
          for (; t < n; ++t) s += static_cast<double>(xa[t]) * xb[t];
          h[a * k + b] = s * f;
        }
      }
    });
    for (int64_t a = 0; a < k; ++a)
      for (int64_t b = a + 1; b < k; ++b) h[a * k + b] = h[b * k + a];
    return h;
  }

  int inverse_cholesky(std::vector<double>& hp, int64_t in) override {
    if (!cholesky_lower(hp, in)) return 1;
    // H^-1 = L^-T L^-1, then its lower Cholesky factor.
    const std::vector<double> linv_t = invert_lower_transposed(hp, in);
    ThreadPool::global().parallel_for(in, 4, [&](int64_t a0, int64_t a1) {
      for (int64_t a = a0; a < a1; ++a) {
        const double* ra = linv_t.data() + a * in;
        for (int64_t b = 0; b <= a; ++b) {
          const double* rb = linv_t.data() + b * in;
          double s = 0;
          for (int64_t p = a; p < in; ++p) s += ra[p] * rb[p];  // (L^-T L^-1)[a][b], p >= max(a, b)
          hp[a * in + b] = s;
          hp[b * in + a] = s;
        }
      }
    });
    return cholesky_lower(hp, in) ? 0 : 2;
  }

  std::unique_ptr<GptqWork> gptq_begin(std::vector<float> wp, const GptqFactor& f, int64_t out) override {
    return std::make_unique<HostGptqWork>(std::move(wp), host_l2(f), f.in, out);
  }

  std::vector<double> awq_losses(const std::vector<const float*>& ws, const std::vector<int64_t>& outs, int64_t in,
                                 const float* xs, int64_t ns, const std::vector<std::vector<float>>& scales,
                                 const IntSpec& spec) override {
    std::vector<std::vector<float>> ref;
    for (size_t li = 0; li < ws.size(); ++li) {
      std::vector<float> y(static_cast<size_t>(ns * outs[li]));
      linear(xs, ns, ws[li], nullptr, outs[li], in, y.data());
      ref.push_back(std::move(y));
    }
    std::vector<double> losses;
    for (const std::vector<float>& s : scales) {
      double loss = 0;
      for (size_t li = 0; li < ws.size(); ++li) {
        const int64_t out = outs[li];
        std::vector<float> t(ws[li], ws[li] + out * in);
        for (int64_t r = 0; r < out; ++r)
          for (int64_t j = 0; j < in; ++j) t[r * in + j] *= s[j];
        auto q = rtn_int("awq search", t.data(), out, in, spec);
        if (q.is_ok()) t = q->dequantize();
        for (int64_t r = 0; r < out; ++r)
          for (int64_t j = 0; j < in; ++j) t[r * in + j] /= s[j];
        std::vector<float> y(static_cast<size_t>(ns * out));
        linear(xs, ns, t.data(), nullptr, out, in, y.data());
        for (size_t i = 0; i < y.size(); ++i) {
          const double d = static_cast<double>(y[i]) - ref[li][i];
          loss += d * d;
        }
      }
      losses.push_back(loss);
    }
    return losses;
  }

  void awq_clip(float* wt, int64_t out, int64_t in, const float* xs, int64_t ns, const IntSpec& spec) override {
    const int64_t group = spec.group <= 0 ? in : spec.group, ng = in / group;
    const int32_t qmin = spec_qmin(spec), qmax = spec_qmax(spec);
    ThreadPool::global().parallel_for(out, 4, [&](int64_t r0, int64_t r1) {
      std::vector<float> cur(static_cast<size_t>(group));
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t g = 0; g < ng; ++g) {
          float* w = wt + r * in + g * group;
          float org_max = 0;
          for (int64_t j = 0; j < group; ++j) org_max = std::max(org_max, std::fabs(w[j]));
          double best = INFINITY;
          float best_max = org_max;
          for (int i_s = 0; i_s < 10; ++i_s) {
            const float mv = org_max * (1.0f - static_cast<float>(i_s) / 20.0f);
            for (int64_t j = 0; j < group; ++j) cur[j] = std::clamp(w[j], -mv, mv);
            const GroupParams p = find_group_params(spec, cur.data(), group, 1);
            for (int64_t j = 0; j < group; ++j) cur[j] = w[j] - dequantize_code(quantize_code(cur[j], p, qmin, qmax), p);
            double e = 0;
            for (int64_t t = 0; t < ns; ++t) {
              const float* xr = xs + t * in + g * group;
              float d = 0;
              for (int64_t j = 0; j < group; ++j) d += xr[j] * cur[j];
              e += static_cast<double>(d) * d;
            }
            if (e < best) {
              best = e;
              best_max = mv;
            }
          }
          for (int64_t j = 0; j < group; ++j) w[j] = std::clamp(w[j], -best_max, best_max);
        }
      }
    });
  }
};

}  // namespace

void gptq_order(const std::vector<double>& diag, bool act_order, double damp_percent, std::vector<int64_t>* perm,
                std::vector<uint8_t>* dead, double* damp) {
  const int64_t in = static_cast<int64_t>(diag.size());
  perm->resize(static_cast<size_t>(in));
  std::iota(perm->begin(), perm->end(), 0);
  if (act_order) std::stable_sort(perm->begin(), perm->end(), [&](int64_t a, int64_t b) { return diag[a] > diag[b]; });
  dead->assign(static_cast<size_t>(in), 0);
  double mean = 0;
  for (int64_t j = 0; j < in; ++j) {
    const double d = diag[(*perm)[j]];
    if (d == 0) (*dead)[j] = 1;  // never active on the calibration data
    mean += d == 0 ? 1.0 : d;
  }
  *damp = in > 0 ? damp_percent * mean / static_cast<double>(in) : 0.0;
}

std::vector<double> gptq_diag_blocks(const double* l2, int64_t in, int64_t block) {
  std::vector<double> d;
  d.reserve(static_cast<size_t>(in * block));
  for (int64_t i1 = 0; i1 < in; i1 += block) {
    const int64_t sz = std::min(block, in - i1);
    for (int64_t a = 0; a < sz; ++a)
      for (int64_t c = 0; c < sz; ++c) d.push_back(c <= a ? l2[(i1 + a) * in + i1 + c] : 0.0);
  }
  return d;
}

std::shared_ptr<HostGptqL2> host_l2(const GptqFactor& f) {
  auto l2 = std::dynamic_pointer_cast<HostGptqL2>(f.l2);
  if (!l2) {  // a factor of another implementation: a programming error, never user input
    std::fprintf(stderr, "frugal quantize: internal error: a GPTQ factor used with another implementation\n");
    std::abort();
  }
  return l2;
}

int QuantMath::gptq_factor_from_hessian(std::vector<double> h, int64_t k, double damp_percent, bool act_order, int64_t block,
                                        GptqFactor* f) {
  f->in = k;
  f->block = block;
  std::vector<double> diag(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) diag[j] = h[j * k + j];
  double damp = 0;
  gptq_order(diag, act_order, damp_percent, &f->perm, &f->dead, &damp);
  auto l2 = std::make_shared<HostGptqL2>();
  l2->l2.resize(static_cast<size_t>(k * k));
  std::vector<double>& hp = l2->l2;
  const std::vector<int64_t>& perm = f->perm;
  ThreadPool::global().parallel_for(k, 16, [&](int64_t a0, int64_t a1) {
    for (int64_t a = a0; a < a1; ++a) {
      for (int64_t b = 0; b < k; ++b) hp[a * k + b] = h[perm[a] * k + perm[b]];
      hp[a * k + a] = (f->dead[a] ? 1.0 : hp[a * k + a]) + damp;
    }
  });
  h = {};
  const int rc = inverse_cholesky(hp, k);
  if (rc != 0) return rc;
  f->diag = gptq_diag_blocks(hp.data(), k, block);
  f->l2 = std::move(l2);
  return 0;
}

int QuantMath::gptq_factor(const float* x, int64_t n, int64_t k, double damp_percent, bool act_order, int64_t block,
                           GptqFactor* f) {
  return gptq_factor_from_hessian(hessian(x, n, k), k, damp_percent, act_order, block, f);
}

QuantMath& host_math() {
  static HostMath m;
  return m;
}

}  // namespace frugal::quantize
