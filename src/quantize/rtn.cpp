#include "quantize/rtn.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace frugal::quantize {

float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }
float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

namespace {
// A stored f16 scale must stay a positive normal-ish number: 0 would divide by zero.
float f16_scale(float s) {
  float r = round_f16(s);
  if (!(r > 0)) r = 5.9604645e-08f;  // smallest f16 subnormal, 2^-24
  if (std::isinf(r)) r = 65504.0f;
  return r;
}
}  // namespace

int32_t spec_qmin(const IntSpec& spec) { return spec.scheme == IntScheme::kCtInt8 ? -128 : 0; }
int32_t spec_qmax(const IntSpec& spec) {
  return spec.scheme == IntScheme::kCtInt8 ? 127 : (1 << spec.bits) - 1;
}

GroupParams find_group_params(const IntSpec& spec, const float* x, int64_t n, int64_t stride) {
  float mn = INFINITY, mx = -INFINITY, amax = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i * stride];
    mn = std::min(mn, v);
    mx = std::max(mx, v);
    amax = std::max(amax, std::fabs(v));
  }
  const int32_t maxq = spec_qmax(spec);
  GroupParams p;
  switch (spec.scheme) {
    case IntScheme::kGptqSym:
      p.scale = f16_scale(2 * std::max(amax, 1e-8f) / static_cast<float>(maxq));
      p.zero = (maxq + 1) / 2;
      break;
    case IntScheme::kGptqAsym: {
      const float lo = std::min(mn, 0.0f), hi = std::max(mx, 0.0f);
      p.scale = f16_scale(std::max(hi - lo, 1e-8f) / static_cast<float>(maxq));
      p.zero = static_cast<int32_t>(std::clamp(std::nearbyint(-lo / p.scale), 1.0f, static_cast<float>(maxq)));
      break;
    }
    case IntScheme::kAwq:
      p.scale = f16_scale(std::max(mx - mn, 1e-5f) / static_cast<float>(maxq));
      p.zero = static_cast<int32_t>(std::clamp(-std::nearbyint(mn / p.scale), 0.0f, static_cast<float>(maxq)));
      break;
    case IntScheme::kCtInt8: {
      float s = round_bf16(std::max(amax, 1e-12f) / 127.0f);
      if (!(s > 0)) s = 1e-30f;
      p.scale = s;
      p.zero = 0;
      break;
    }
  }
  return p;
}

std::vector<float> IntQuant::dequantize() const {
  std::vector<float> w(static_cast<size_t>(out * in));
  ThreadPool::global().parallel_for(out, 16, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      for (int64_t i = 0; i < in; ++i) {
        const int64_t g = g_idx[i];
        const GroupParams p{scale[g * out + o], zero[g * out + o]};
        w[o * in + i] = dequantize_code(q[o * in + i], p);
      }
    }
  });
  return w;
}

Result<int64_t> resolve_group(const std::string& tensor, int64_t in, int64_t group) {
  if (group == -1 || group == 0) return in;
  if (group < 0 || in % group != 0) {
    return invalid_argument("--group-size " + std::to_string(group) + " does not divide the input dimension " +
                            std::to_string(in) + " of " + tensor);
  }
  return group;
}

Result<IntQuant> rtn_int(const std::string& tensor, const float* w, int64_t out, int64_t in, const IntSpec& spec) {
  FRUGAL_ASSIGN_OR_RETURN(int64_t group, resolve_group(tensor, in, spec.group));
  IntQuant r;
  r.spec = spec;
  r.out = out;
  r.in = in;
  r.group = group;
  const int64_t ng = in / group;
  r.q.resize(static_cast<size_t>(out * in));
  r.scale.resize(static_cast<size_t>(ng * out));
  r.zero.resize(static_cast<size_t>(ng * out));
  r.g_idx.resize(static_cast<size_t>(in));
  for (int64_t i = 0; i < in; ++i) r.g_idx[i] = static_cast<int32_t>(i / group);
  const int32_t qmin = spec_qmin(spec), qmax = spec_qmax(spec);
  ThreadPool::global().parallel_for(out, 16, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      for (int64_t g = 0; g < ng; ++g) {
        const float* x = w + o * in + g * group;
        const GroupParams p = find_group_params(spec, x, group, 1);
        r.scale[g * out + o] = p.scale;
        r.zero[g * out + o] = p.zero;
        for (int64_t i = 0; i < group; ++i) r.q[o * in + g * group + i] = quantize_code(x[i], p, qmin, qmax);
      }
    }
  });
  return r;
}

uint8_t fp8_e4m3_encode(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0.015625f) {  // below 2^-6: subnormal, steps of 2^-9; code 8 is the smallest normal
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  uint32_t u;
  std::memcpy(&u, &a, 4);
  int32_t e = static_cast<int32_t>(u >> 23) - 127;  // -6 .. 8
  uint32_t mant = u & 0x7fffffu;
  uint32_t m = mant >> 20;
  const uint32_t rem = mant & 0xfffffu;
  if (rem > 0x80000u || (rem == 0x80000u && (m & 1u))) ++m;
  if (m == 8) {
    m = 0;
    ++e;
  }
  const uint32_t code = static_cast<uint32_t>(e + 7) << 3 | m;
  return sign | static_cast<uint8_t>(std::min<uint32_t>(code, 0x7e));
}

Fp8Quant rtn_fp8(const float* w, int64_t out, int64_t in, Fp8Scale mode) {
  Fp8Quant r;
  r.mode = mode;
  r.out = out;
  r.in = in;
  r.q.resize(static_cast<size_t>(out * in));
  constexpr float kMax = 448.0f;
  auto amax_of = [&](int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
    float m = 0;
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t i = i0; i < i1; ++i) m = std::max(m, std::fabs(w[o * in + i]));
    return m;
  };
  auto encode = [&](int64_t o0, int64_t o1, int64_t i0, int64_t i1, float s) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t i = i0; i < i1; ++i) r.q[o * in + i] = fp8_e4m3_encode(w[o * in + i] / s);
  };
  switch (mode) {
    case Fp8Scale::kTensor: {
      const float s = round_bf16(std::max(amax_of(0, out, 0, in), 1e-12f) / kMax);
      r.scale = {s};
      ThreadPool::global().parallel_for(out, 16, [&](int64_t a, int64_t b) { encode(a, b, 0, in, s); });
      break;
    }
    case Fp8Scale::kChannel:
      r.scale.resize(static_cast<size_t>(out));
      ThreadPool::global().parallel_for(out, 16, [&](int64_t a, int64_t b) {
        for (int64_t o = a; o < b; ++o) {
          r.scale[o] = round_bf16(std::max(amax_of(o, o + 1, 0, in), 1e-12f) / kMax);
          encode(o, o + 1, 0, in, r.scale[o]);
        }
      });
      break;
    case Fp8Scale::kBlock: {
      const int64_t nbo = (out + 127) / 128, nbi = (in + 127) / 128;
      r.scale.resize(static_cast<size_t>(nbo * nbi));
      ThreadPool::global().parallel_for(nbo, 1, [&](int64_t a, int64_t b) {
        for (int64_t bo = a; bo < b; ++bo) {
          const int64_t o0 = bo * 128, o1 = std::min(out, o0 + 128);
          for (int64_t bi = 0; bi < nbi; ++bi) {
            const int64_t i0 = bi * 128, i1 = std::min(in, i0 + 128);
            const float s = std::max(amax_of(o0, o1, i0, i1), 1e-12f) / kMax;
            r.scale[bo * nbi + bi] = s;
            encode(o0, o1, i0, i1, s);
          }
        }
      });
      break;
    }
  }
  return r;
}

std::vector<float> Fp8Quant::dequantize() const {
  std::vector<float> w(static_cast<size_t>(out * in));
  const int64_t nbi = (in + 127) / 128;
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      const float s = mode == Fp8Scale::kTensor ? scale[0]
                      : mode == Fp8Scale::kChannel ? scale[o] : scale[(o / 128) * nbi + i / 128];
      w[o * in + i] = f8e4m3_to_f32(q[o * in + i]) * s;
    }
  }
  return w;
}

// bitsandbytes' NF4 code book (QLoRA, appendix E), as bitsandbytes stores it in quant_map.
const float kNf4Table[16] = {-1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
                             -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
                             0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f,
                             0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
                             0.7229568362236023f, 1.0f};

Result<Nf4Quant> rtn_nf4(const std::string& tensor, const float* w, int64_t out, int64_t in, int64_t block) {
  const int64_t n = out * in;
  if (block <= 0 || n % block != 0) {
    return invalid_argument("--group-size " + std::to_string(block) + " does not divide the " + std::to_string(n) +
                            " elements of " + tensor + " (nf4 blocks run over the flattened weight)");
  }
  Nf4Quant r;
  r.out = out;
  r.in = in;
  r.block = block;
  r.idx.resize(static_cast<size_t>(n));
  r.absmax.resize(static_cast<size_t>(n / block));
  ThreadPool::global().parallel_for(n / block, 64, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float am = 0;
      for (int64_t j = 0; j < block; ++j) am = std::max(am, std::fabs(w[b * block + j]));
      am = std::max(am, 1e-12f);
      r.absmax[b] = am;
      for (int64_t j = 0; j < block; ++j) {
        const float x = w[b * block + j] / am;
        int best = 0;
        float best_d = INFINITY;
        for (int c = 0; c < 16; ++c) {
          const float d = std::fabs(x - kNf4Table[c]);
          if (d < best_d) {  // strict: ties keep the lower code, as torch.argmin does
            best_d = d;
            best = c;
          }
        }
        r.idx[b * block + j] = static_cast<uint8_t>(best);
      }
    }
  });
  return r;
}

std::vector<float> Nf4Quant::dequantize() const {
  std::vector<float> w(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) w[i] = kNf4Table[idx[i]] * absmax[i / static_cast<size_t>(block)];
  return w;
}

}  // namespace frugal::quantize
