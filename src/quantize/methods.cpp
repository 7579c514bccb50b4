#include "quantize/methods.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/thread_pool.h"

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

std::vector<float> subsample_rows(const std::vector<float>& x, int64_t n, int64_t width, int64_t max_rows, int64_t* out_n) {
  if (n <= max_rows) {
    *out_n = n;
    return x;
  }
  std::vector<float> r(static_cast<size_t>(max_rows * width));
  for (int64_t i = 0; i < max_rows; ++i) {
    const int64_t src = i * n / max_rows;
    std::copy(x.begin() + src * width, x.begin() + (src + 1) * width, r.begin() + i * width);
  }
  *out_n = max_rows;
  return r;
}

}  // namespace

std::vector<double> gptq_hessian(const std::vector<float>& x, int64_t n, int64_t k) {
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

Result<GptqFactor> gptq_factor(const std::string& tensor, std::vector<double> h, int64_t in, double damp_percent,
                               bool act_order) {
  GptqFactor f;
  f.in = in;
  f.perm.resize(static_cast<size_t>(in));
  std::iota(f.perm.begin(), f.perm.end(), 0);
  if (act_order) {
    std::stable_sort(f.perm.begin(), f.perm.end(), [&](int64_t a, int64_t b) { return h[a * in + a] > h[b * in + b]; });
  }
  std::vector<double> hp(static_cast<size_t>(in * in));
  for (int64_t a = 0; a < in; ++a)
    for (int64_t b = 0; b < in; ++b) hp[a * in + b] = h[f.perm[a] * in + f.perm[b]];
  h.clear();
  f.dead.assign(static_cast<size_t>(in), 0);
  double mean_diag = 0;
  for (int64_t j = 0; j < in; ++j) {
    if (hp[j * in + j] == 0) {  // dead input: never active on the calibration data
      hp[j * in + j] = 1;
      f.dead[j] = 1;
    }
    mean_diag += hp[j * in + j];
  }
  mean_diag /= static_cast<double>(in);
  for (int64_t j = 0; j < in; ++j) hp[j * in + j] += damp_percent * mean_diag;
  if (!cholesky_lower(hp, in)) return internal_error(tensor + ": GPTQ Hessian is not positive definite after damping");
  // H^-1 = L^-T L^-1; U = upper Cholesky factor of H^-1 (U^T U = H^-1), U[i][j] = L2[j][i].
  const std::vector<double> linv_t = invert_lower_transposed(hp, in);
  f.l2.resize(static_cast<size_t>(in * in));
  ThreadPool::global().parallel_for(in, 4, [&](int64_t a0, int64_t a1) {
    for (int64_t a = a0; a < a1; ++a) {
      const double* ra = linv_t.data() + a * in;
      for (int64_t b = 0; b <= a; ++b) {
        const double* rb = linv_t.data() + b * in;
        double s = 0;
        for (int64_t p = a; p < in; ++p) s += ra[p] * rb[p];  // (L^-T L^-1)[a][b], p >= max(a, b)
        f.l2[a * in + b] = s;
        f.l2[b * in + a] = s;
      }
    }
  });
  if (!cholesky_lower(f.l2, in)) return internal_error(tensor + ": GPTQ inverse Hessian is not positive definite");
  return f;
}

Result<IntQuant> gptq_quantize(const std::string& tensor, const std::vector<float>& w, int64_t out, int64_t in,
                               std::vector<double> h, const GptqOptions& o) {
  FRUGAL_ASSIGN_OR_RETURN(GptqFactor f, gptq_factor(tensor, std::move(h), in, o.damp_percent, o.act_order));
  return gptq_quantize(tensor, w, out, f, o);
}

Result<IntQuant> gptq_quantize(const std::string& tensor, const std::vector<float>& w, int64_t out, const GptqFactor& f,
                               const GptqOptions& o) {
  const int64_t in = f.in;
  FRUGAL_ASSIGN_OR_RETURN(int64_t group, resolve_group(tensor, in, o.spec.group));
  const int64_t ng = in / group;
  const int32_t qmin = spec_qmin(o.spec), qmax = spec_qmax(o.spec);
  const std::vector<int64_t>& perm = f.perm;
  // wp [in, out]: row j is original column perm[j] (zero for dead inputs).
  std::vector<float> wp(static_cast<size_t>(in * out));
  for (int64_t j = 0; j < in; ++j)
    for (int64_t r = 0; r < out; ++r) wp[j * out + r] = f.dead[j] ? 0.0f : w[r * in + perm[j]];
  const std::vector<double>& hinv = f.l2;
  auto U = [&](int64_t i, int64_t j) { return hinv[j * in + i]; };

  IntQuant q;
  q.spec = o.spec;
  q.out = out;
  q.in = in;
  q.group = group;
  q.q.resize(static_cast<size_t>(out * in));
  q.scale.resize(static_cast<size_t>(ng * out));
  q.zero.resize(static_cast<size_t>(ng * out));
  q.g_idx.resize(static_cast<size_t>(in));
  // Group of permuted column j, and static group parameters from the original weights.
  std::vector<int64_t> group_of(static_cast<size_t>(in));
  for (int64_t j = 0; j < in; ++j) {
    group_of[j] = o.static_groups ? perm[j] / group : j / group;
    q.g_idx[perm[j]] = static_cast<int32_t>(group_of[j]);
  }
  if (o.static_groups) {
    for (int64_t r = 0; r < out; ++r)
      for (int64_t g = 0; g < ng; ++g) {
        const GroupParams p = find_group_params(o.spec, w.data() + r * in + g * group, group, 1);
        q.scale[g * out + r] = p.scale;
        q.zero[g * out + r] = p.zero;
      }
  }
  const int64_t bs = std::max<int64_t>(1, o.block);
  std::vector<float> err(static_cast<size_t>(bs * out));
  for (int64_t i1 = 0; i1 < in; i1 += bs) {
    const int64_t i2 = std::min(in, i1 + bs);
    ThreadPool::global().parallel_for(out, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t j = i1; j < i2; ++j) {
          if (!o.static_groups && j % group == 0) {
            const GroupParams p = find_group_params(o.spec, wp.data() + j * out + r, group, out);
            q.scale[(j / group) * out + r] = p.scale;
            q.zero[(j / group) * out + r] = p.zero;
          }
          const int64_t g = group_of[j];
          const GroupParams p{q.scale[g * out + r], q.zero[g * out + r]};
          const float wv = wp[j * out + r];
          const int32_t code = quantize_code(wv, p, qmin, qmax);
          q.q[r * in + perm[j]] = code;
          const float e = static_cast<float>((wv - dequantize_code(code, p)) / U(j, j));
          err[(j - i1) * out + r] = e;
          for (int64_t jj = j + 1; jj < i2; ++jj) wp[jj * out + r] -= static_cast<float>(e * U(j, jj));
        }
      }
    });
    ThreadPool::global().parallel_for(in - i2, 4, [&](int64_t a0, int64_t a1) {
      for (int64_t jj = i2 + a0; jj < i2 + a1; ++jj) {
        float* row = wp.data() + jj * out;
        for (int64_t j = i1; j < i2; ++j) {
          const float u = static_cast<float>(U(j, jj));
          const float* e = err.data() + (j - i1) * out;
          for (int64_t r = 0; r < out; ++r) row[r] -= e[r] * u;
        }
      }
    });
  }
  return q;
}

namespace {
// Dequantized RTN of w [out, in] (AWQ search helper).
std::vector<float> rtn_dequant(const std::vector<float>& w, int64_t out, int64_t in, const IntSpec& spec) {
  auto q = rtn_int("awq search", w.data(), out, in, spec);
  return q.is_ok() ? q->dequantize() : w;
}
}  // namespace

std::vector<float> awq_search_scales(const std::vector<const LinearF32*>& ls, const std::vector<float>& x, int64_t n,
                                     const IntSpec& spec, int32_t grid) {
  const int64_t in = ls[0]->in;
  std::vector<double> xm(static_cast<size_t>(in), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < in; ++j) xm[j] += std::fabs(x[t * in + j]);
  for (auto& v : xm) v /= static_cast<double>(n);
  int64_t ns = 0;
  const std::vector<float> xs = subsample_rows(x, n, in, 512, &ns);
  std::vector<std::vector<float>> ref;
  for (const LinearF32* l : ls) {
    std::vector<float> y(static_cast<size_t>(ns * l->out));
    LinearF32 nb{.name = "", .out = l->out, .in = l->in, .w = l->w, .b = {}};
    linear_forward(xs.data(), ns, nb, y.data());
    ref.push_back(std::move(y));
  }
  double best = INFINITY;
  std::vector<float> best_s(static_cast<size_t>(in), 1.0f);
  for (int32_t gi = 0; gi < grid; ++gi) {
    const double ratio = static_cast<double>(gi) / grid;
    std::vector<float> s(static_cast<size_t>(in));
    float mx = 0, mn = INFINITY;
    for (int64_t j = 0; j < in; ++j) {
      s[j] = std::max(static_cast<float>(std::pow(xm[j], ratio)), 1e-4f);
      mx = std::max(mx, s[j]);
      mn = std::min(mn, s[j]);
    }
    const float norm = std::sqrt(mx * mn);
    for (auto& v : s) v /= norm;
    double loss = 0;
    for (size_t li = 0; li < ls.size(); ++li) {
      const LinearF32& l = *ls[li];
      LinearF32 t{.name = "", .out = l.out, .in = l.in, .w = l.w, .b = {}};
      for (int64_t r = 0; r < l.out; ++r)
        for (int64_t j = 0; j < in; ++j) t.w[r * in + j] *= s[j];
      t.w = rtn_dequant(t.w, l.out, in, spec);
      for (int64_t r = 0; r < l.out; ++r)
        for (int64_t j = 0; j < in; ++j) t.w[r * in + j] /= s[j];
      std::vector<float> y(static_cast<size_t>(ns * l.out));
      linear_forward(xs.data(), ns, t, y.data());
      for (size_t i = 0; i < y.size(); ++i) {
        const double d = static_cast<double>(y[i]) - ref[li][i];
        loss += d * d;
      }
    }
    if (loss < best) {
      best = loss;
      best_s = s;
    }
  }
  return best_s;
}

void awq_clip(LinearF32& l, const std::vector<float>& x, int64_t n, const IntSpec& spec) {
  const int64_t in = l.in, group = spec.group <= 0 ? in : spec.group, ng = in / group;
  int64_t ns = 0;
  const std::vector<float> xs = subsample_rows(x, n, in, 128, &ns);
  const int32_t qmin = spec_qmin(spec), qmax = spec_qmax(spec);
  ThreadPool::global().parallel_for(l.out, 4, [&](int64_t r0, int64_t r1) {
    std::vector<float> cur(static_cast<size_t>(group));
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t g = 0; g < ng; ++g) {
        float* w = l.w.data() + r * in + g * group;
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
            const float* xr = xs.data() + t * in + g * group;
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

std::vector<float> smoothquant_scales(const std::vector<const LinearF32*>& ls, const std::vector<float>& x, int64_t n,
                                      double alpha) {
  const int64_t in = ls[0]->in;
  std::vector<float> amax_x(static_cast<size_t>(in), 0.0f), amax_w(static_cast<size_t>(in), 0.0f);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < in; ++j) amax_x[j] = std::max(amax_x[j], std::fabs(x[t * in + j]));
  for (const LinearF32* l : ls)
    for (int64_t r = 0; r < l->out; ++r)
      for (int64_t j = 0; j < in; ++j) amax_w[j] = std::max(amax_w[j], std::fabs(l->w[r * in + j]));
  std::vector<float> s(static_cast<size_t>(in));
  for (int64_t j = 0; j < in; ++j) {
    const double v = std::pow(std::max(amax_x[j], 1e-5f), alpha) / std::pow(std::max(amax_w[j], 1e-5f), 1.0 - alpha);
    s[j] = std::max(static_cast<float>(v), 1e-5f);
  }
  return s;
}

void scale_columns(LinearF32& l, const std::vector<float>& s) {
  for (int64_t r = 0; r < l.out; ++r)
    for (int64_t j = 0; j < l.in; ++j) l.w[r * l.in + j] *= s[j];
}

void divide_rows(LinearF32& l, const std::vector<float>& s) {
  for (int64_t r = 0; r < l.out; ++r) {
    for (int64_t j = 0; j < l.in; ++j) l.w[r * l.in + j] /= s[r];
    if (!l.b.empty()) l.b[r] /= s[r];
  }
}

double relative_output_error(const std::vector<float>& x, int64_t n, const std::vector<float>& xq,
                             const std::vector<float>& w, const std::vector<float>& wq, int64_t out, int64_t in) {
  int64_t ns = 0;
  const std::vector<float> xs = subsample_rows(x, n, in, 512, &ns);
  int64_t ns2 = 0;
  const std::vector<float> xqs = xq.empty() ? xs : subsample_rows(xq, n, in, 512, &ns2);
  LinearF32 a{.name = "", .out = out, .in = in, .w = w, .b = {}};
  LinearF32 b{.name = "", .out = out, .in = in, .w = wq, .b = {}};
  std::vector<float> ya(static_cast<size_t>(ns * out)), yb(ya.size());
  linear_forward(xs.data(), ns, a, ya.data());
  linear_forward(xqs.data(), ns, b, yb.data());
  double num = 0, den = 0;
  for (size_t i = 0; i < ya.size(); ++i) {
    const double d = static_cast<double>(ya[i]) - yb[i];
    num += d * d;
    den += static_cast<double>(ya[i]) * ya[i];
  }
  return den > 0 ? num / den : num;
}

std::vector<float> fake_quant_tokens_int8(const std::vector<float>& x, int64_t n, int64_t in, const std::vector<float>& s) {
  std::vector<float> r(x.size());
  for (int64_t t = 0; t < n; ++t) {
    float amax = 0;
    for (int64_t j = 0; j < in; ++j) {
      const float v = s.empty() ? x[t * in + j] : x[t * in + j] / s[j];
      r[t * in + j] = v;
      amax = std::max(amax, std::fabs(v));
    }
    const float sc = std::max(amax, 1e-12f) / 127.0f;
    for (int64_t j = 0; j < in; ++j) r[t * in + j] = std::clamp(std::nearbyint(r[t * in + j] / sc), -128.0f, 127.0f) * sc;
  }
  return r;
}

}  // namespace frugal::quantize
