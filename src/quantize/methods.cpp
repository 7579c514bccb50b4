#include "quantize/methods.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/thread_pool.h"

namespace frugal::quantize {

namespace {

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

std::vector<double> gptq_hessian(const std::vector<float>& x, int64_t n, int64_t k, QuantMath& m) {
  return m.hessian(x.data(), n, k);
}

namespace {

Result<GptqFactor> factor_result(const std::string& tensor, int rc, GptqFactor f, const QuantMath& m) {
  FRUGAL_RETURN_IF_ERROR(m.status().with_context(tensor));  // a device failure, not a property of H
  if (rc == 1) return internal_error(tensor + ": GPTQ Hessian is not positive definite after damping");
  if (rc != 0) return internal_error(tensor + ": GPTQ inverse Hessian is not positive definite");
  return f;
}

}  // namespace

Result<GptqFactor> gptq_factor(const std::string& tensor, std::vector<double> h, int64_t in, const GptqOptions& o,
                               QuantMath& m) {
  GptqFactor f;
  const int rc = m.gptq_factor_from_hessian(std::move(h), in, o.damp_percent, o.act_order, std::max<int64_t>(1, o.block), &f);
  return factor_result(tensor, rc, std::move(f), m);
}

Result<GptqFactor> gptq_factor(const std::string& tensor, const std::vector<float>& x, int64_t n, int64_t in,
                               const GptqOptions& o, QuantMath& m) {
  GptqFactor f;
  const int rc = m.gptq_factor(x.data(), n, in, o.damp_percent, o.act_order, std::max<int64_t>(1, o.block), &f);
  return factor_result(tensor, rc, std::move(f), m);
}

Result<IntQuant> gptq_quantize(const std::string& tensor, const std::vector<float>& w, int64_t out, int64_t in,
                               std::vector<double> h, const GptqOptions& o, QuantMath& m) {
  FRUGAL_ASSIGN_OR_RETURN(GptqFactor f, gptq_factor(tensor, std::move(h), in, o, m));
  return gptq_quantize(tensor, w, out, f, o, m);
}

Result<IntQuant> gptq_quantize(const std::string& tensor, const std::vector<float>& w, int64_t out, const GptqFactor& f,
                               const GptqOptions& o, QuantMath& m) {
  const int64_t in = f.in;
  FRUGAL_ASSIGN_OR_RETURN(int64_t group, resolve_group(tensor, in, o.spec.group));
  const int64_t ng = in / group;
  const int32_t qmin = spec_qmin(o.spec), qmax = spec_qmax(o.spec);
  const std::vector<int64_t>& perm = f.perm;
  // wp [in, out]: row j is original column perm[j] (zero for dead inputs).
  std::vector<float> wp(static_cast<size_t>(in * out));
  // A transpose in 64 x 64 tiles (w is read along rows of the tile, not down whole columns).
  ThreadPool::global().parallel_for((in + 63) / 64, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t jt = t0 * 64; jt < std::min(in, t1 * 64); jt += 64)
      for (int64_t rt = 0; rt < out; rt += 64)
        for (int64_t j = jt; j < std::min(in, jt + 64); ++j)
          for (int64_t r = rt; r < std::min(out, rt + 64); ++r) wp[j * out + r] = f.dead[j] ? 0.0f : w[r * in + perm[j]];
  });
  const int64_t bs = std::max<int64_t>(1, o.block);
  if (f.block != bs || f.in != in || f.perm.size() != static_cast<size_t>(in)) {
    return internal_error(tensor + ": GPTQ factor of block " + std::to_string(f.block) + " used with block " + std::to_string(bs));
  }

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
  std::unique_ptr<GptqWork> work = m.gptq_begin(std::move(wp), f, out);
  std::vector<float> blk(static_cast<size_t>(bs * out)), err(static_cast<size_t>(bs * out)), tail;
  for (int64_t i1 = 0; i1 < in; i1 += bs) {
    const int64_t i2 = std::min(in, i1 + bs);
    work->rows(i1, i2, blk.data());  // the block as every earlier block's update left it
    // A group that starts in this block and reaches past it reads its later rows as they are now.
    int64_t tail_end = i2;
    if (!o.static_groups)
      for (int64_t j = i1; j < i2; ++j)
        if (j % group == 0) tail_end = std::max(tail_end, std::min(in, j + group));
    if (tail_end > i2) {
      tail.resize(static_cast<size_t>((tail_end - i2) * out));
      work->rows(i2, tail_end, tail.data());
    }
    // U[j][jj] = L2[jj][j] within this block: D[(jj - i1) * sz + (j - i1)].
    const double* D = f.diag.data() + i1 * bs;
    const int64_t sz = i2 - i1;
    // A task owns a range of output rows; per column j, the codes and errors of its rows, then
    // the update of the block's later columns runs along the rows (contiguous in blk: vectorised).
    ThreadPool::global().parallel_for(out, 16, [&](int64_t r0, int64_t r1) {
      std::vector<float> gbuf(static_cast<size_t>(group)), ebuf(static_cast<size_t>(r1 - r0));
      for (int64_t j = i1; j < i2; ++j) {
        if (!o.static_groups && j % group == 0) {
          for (int64_t r = r0; r < r1; ++r) {
            for (int64_t jj = j; jj < j + group; ++jj)
              gbuf[jj - j] = jj < i2 ? blk[(jj - i1) * out + r] : tail[(jj - i2) * out + r];
            const GroupParams p = find_group_params(o.spec, gbuf.data(), group, 1);
            q.scale[(j / group) * out + r] = p.scale;
            q.zero[(j / group) * out + r] = p.zero;
          }
        }
        const int64_t g = group_of[j];
        const double ujj = D[(j - i1) * sz + (j - i1)];
        const float* brow = blk.data() + (j - i1) * out;
        float* erow = err.data() + (j - i1) * out;
        for (int64_t r = r0; r < r1; ++r) {
          const GroupParams p{q.scale[g * out + r], q.zero[g * out + r]};
          const float wv = brow[r];
          const int32_t code = quantize_code(wv, p, qmin, qmax);
          q.q[r * in + perm[j]] = code;
          const float e = static_cast<float>((wv - dequantize_code(code, p)) / ujj);
          erow[r] = e;
          ebuf[r - r0] = e;
        }
        for (int64_t jj = j + 1; jj < i2; ++jj) {
          const double u = D[(jj - i1) * sz + (j - i1)];
          float* row = blk.data() + (jj - i1) * out + r0;
          const int64_t nr = r1 - r0;
          for (int64_t i = 0; i < nr; ++i) row[i] -= static_cast<float>(static_cast<double>(ebuf[i]) * u);
        }
      }
    });
    if (i2 < in) work->update(i1, i2, err.data());
  }
  return q;
}


std::vector<float> awq_search_scales(const std::vector<const LinearF32*>& ls, const std::vector<float>& x, int64_t n,
                                     const IntSpec& spec, int32_t grid, QuantMath& m) {
  const int64_t in = ls[0]->in;
  std::vector<double> xm(static_cast<size_t>(in), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < in; ++j) xm[j] += std::fabs(x[t * in + j]);
  for (auto& v : xm) v /= static_cast<double>(n);
  int64_t ns = 0;
  const std::vector<float> xs = subsample_rows(x, n, in, 512, &ns);
  std::vector<std::vector<float>> cands;
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
    cands.push_back(std::move(s));
  }
  std::vector<const float*> ws;
  std::vector<int64_t> outs;
  for (const LinearF32* l : ls) {
    ws.push_back(l->w.data());
    outs.push_back(l->out);
  }
  const std::vector<double> losses = m.awq_losses(ws, outs, in, xs.data(), ns, cands, spec);
  double best = INFINITY;
  std::vector<float> best_s(static_cast<size_t>(in), 1.0f);
  for (size_t c = 0; c < cands.size(); ++c) {
    if (losses[c] < best) {
      best = losses[c];
      best_s = cands[c];
    }
  }
  return best_s;
}

void awq_clip(LinearF32& l, const std::vector<float>& x, int64_t n, const IntSpec& spec, QuantMath& m) {
  int64_t ns = 0;
  const std::vector<float> xs = subsample_rows(x, n, l.in, 128, &ns);
  m.awq_clip(l.w.data(), l.out, l.in, xs.data(), ns, spec);
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
  ThreadPool::global().parallel_for(l.out, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < l.in; ++j) l.w[r * l.in + j] *= s[j];
  });
}

void divide_rows(LinearF32& l, const std::vector<float>& s) {
  ThreadPool::global().parallel_for(l.out, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t j = 0; j < l.in; ++j) l.w[r * l.in + j] /= s[r];
      if (!l.b.empty()) l.b[r] /= s[r];
    }
  });
}

double relative_output_error(const std::vector<float>& x, int64_t n, const std::vector<float>& xq,
                             const std::vector<float>& w, const std::vector<float>& wq, int64_t out, int64_t in,
                             QuantMath& m) {
  int64_t ns = 0;
  const std::vector<float> xs = subsample_rows(x, n, in, 512, &ns);
  int64_t ns2 = 0;
  const std::vector<float> xqs = xq.empty() ? xs : subsample_rows(xq, n, in, 512, &ns2);
  std::vector<float> ya(static_cast<size_t>(ns * out)), yb(ya.size());
  m.linear(xs.data(), ns, w.data(), nullptr, out, in, ya.data());
  m.linear(xqs.data(), ns, wq.data(), nullptr, out, in, yb.data());
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
