// Paged causal attention with online softmax, generic over Vec; part of kernels_impl.h.
//
// One work item = some query tokens of one sequence x all query heads of one kv head (GQA), so
// every key and value row read through the block table serves all of those query rows while it
// is in L1. Keys are visited in chunks of kAttentionChunk: score the chunk for each row, then
// rescale that row's running sum once per chunk rather than once per key.

namespace frugal::cpu::FRUGAL_CPU_ISA {

template <class L>
inline float dot_row(const float* q, const typename L::T* k, int d) {
  F acc = Vec::zero();
  int e = 0;
  for (; e + kW <= d; e += kW) acc = Vec::fma(Vec::load(q + e), L::vec(k + e), acc);
  float s = Vec::reduce_add(acc);
  for (; e < d; ++e) s += q[e] * L::one(k + e);
  return s;
}

// s[j] = dot(q, k[j]) for n keys, four at a time: four independent FMA chains instead of one
// latency-bound chain per key, and one load of q per four keys.
template <class L>
inline void dot_keys(const float* q, const typename L::T* const* k, int n, int d, float* s) {
  int j = 0;
  for (; j + 4 <= n && d % kW == 0; j += 4) {
    F a0 = Vec::zero(), a1 = Vec::zero(), a2 = Vec::zero(), a3 = Vec::zero();
    for (int e = 0; e < d; e += kW) {
      const F qv = Vec::load(q + e);
      a0 = Vec::fma(qv, L::vec(k[j] + e), a0);
      a1 = Vec::fma(qv, L::vec(k[j + 1] + e), a1);
      a2 = Vec::fma(qv, L::vec(k[j + 2] + e), a2);
      a3 = Vec::fma(qv, L::vec(k[j + 3] + e), a3);
    }
    s[j] = Vec::reduce_add(a0), s[j + 1] = Vec::reduce_add(a1);
    s[j + 2] = Vec::reduce_add(a2), s[j + 3] = Vec::reduce_add(a3);
  }
  for (; j < n; ++j) s[j] = dot_row<L>(q, k[j], d);
}

// acc[0:d] = acc * rescale + sum_j p[j] * v[j][0:d]. The accumulator stays in registers across
// all n keys, a block of kB vectors at a time, so each key costs loads of v only.
template <class L>
inline void accumulate_values(float* acc, float rescale, const float* p, const typename L::T* const* v, int n,
                              int d) {
  constexpr int kB = 4;
  const F rs = Vec::set1(rescale);
  int e = 0;
  for (; e + kB * kW <= d; e += kB * kW) {
    F a[kB];
    for (int b = 0; b < kB; ++b) a[b] = Vec::mul(Vec::load(acc + e + b * kW), rs);
    for (int j = 0; j < n; ++j) {
      const F pj = Vec::set1(p[j]);
      for (int b = 0; b < kB; ++b) a[b] = Vec::fma(pj, L::vec(v[j] + e + b * kW), a[b]);
    }
    for (int b = 0; b < kB; ++b) Vec::store(acc + e + b * kW, a[b]);
  }
  for (; e + kW <= d; e += kW) {
    F a = Vec::mul(Vec::load(acc + e), rs);
    for (int j = 0; j < n; ++j) a = Vec::fma(Vec::set1(p[j]), L::vec(v[j] + e), a);
    Vec::store(acc + e, a);
  }
  for (; e < d; ++e) {
    float a = acc[e] * rescale;
    for (int j = 0; j < n; ++j) a += p[j] * L::one(v[j] + e);
    acc[e] = a;
  }
}

// p[0:n] = exp(s[0:n] - mx), returns their sum.
inline float exp_shifted(float* s, int n, float mx) {
  const F m = Vec::set1(mx);
  F sum = Vec::zero();
  int j = 0;
  for (; j + kW <= n; j += kW) {
    const F e = vexp(Vec::sub(Vec::load(s + j), m));
    Vec::store(s + j, e);
    sum = Vec::add(sum, e);
  }
  float total = Vec::reduce_add(sum);
  if (j < n) {
    const F e = vexp(Vec::sub(load_tail(s + j, n - j), m));
    float tmp[kW];
    Vec::store(tmp, e);
    for (int i = 0; i < n - j; ++i) {
      s[j + i] = tmp[i];
      total += tmp[i];
    }
  }
  return total;
}

struct AttnRow {
  int32_t lo;   // first key position this row may see
  int32_t pos;  // last key position (its own)
};

template <class L>
void attention_typed(const ops::AttentionParams& p, const AttentionItem& it, float* scratch) {
  using T = typename L::T;
  const auto& c = p.cache;
  const int d = c.head_dim, group = p.n_head / c.n_head_kv, bs = c.block_size;
  const int n_q = p.q_start[it.seq + 1] - p.q_start[it.seq];
  const int ctx = p.ctx_len[it.seq];
  const int n_rows = (it.i1 - it.i0) * group;
  if (n_rows <= 0) return;
  const int32_t* table = p.block_tables + static_cast<int64_t>(it.seq) * p.max_blocks_per_seq;
  const int64_t kv_row = static_cast<int64_t>(c.n_head_kv) * d;

  // scratch: q [n_rows][d] (pre-scaled), acc [n_rows][d], m [n_rows], l [n_rows], scores.
  float* qs = scratch;
  float* acc = qs + static_cast<int64_t>(n_rows) * d;
  float* mx = acc + static_cast<int64_t>(n_rows) * d;
  float* sum = mx + n_rows;
  float* sc = sum + n_rows;
  AttnRow rows[kAttentionMaxRows] = {};
  for (int i = it.i0; i < it.i1; ++i) {
    const int pos = ctx - n_q + i;
    const int lo = p.sliding_window > 0 && pos - p.sliding_window + 1 > 0 ? pos - p.sliding_window + 1 : 0;
    const int64_t t = p.q_start[it.seq] + i;
    for (int g = 0; g < group; ++g) {
      const int r = (i - it.i0) * group + g;
      rows[r] = {lo, pos};
      const float* q = static_cast<const float*>(p.q) + t * p.ld_q + static_cast<int64_t>(it.kv_head * group + g) * d;
      for (int e = 0; e < d; ++e) qs[static_cast<int64_t>(r) * d + e] = q[e] * p.scale;
      for (int e = 0; e < d; ++e) acc[static_cast<int64_t>(r) * d + e] = 0.0f;
      mx[r] = -INFINITY;
      sum[r] = 0.0f;
    }
  }
  const int kv_lo = rows[0].lo, kv_hi = rows[n_rows - 1].pos;
  const T* kp[kAttentionChunk];
  const T* vp[kAttentionChunk];
  for (int c0 = kv_lo; c0 <= kv_hi; c0 += kAttentionChunk) {
    const int c1 = c0 + kAttentionChunk <= kv_hi + 1 ? c0 + kAttentionChunk : kv_hi + 1;
    for (int j = c0; j < c1; ++j) {
      const int64_t slot = static_cast<int64_t>(table[j / bs]) * bs + j % bs;
      const int64_t off = slot * kv_row + static_cast<int64_t>(it.kv_head) * d;
      kp[j - c0] = static_cast<const T*>(c.k_cache) + off;
      vp[j - c0] = static_cast<const T*>(c.v_cache) + off;
    }
    for (int r = 0; r < n_rows; ++r) {
      const int jlo = rows[r].lo > c0 ? rows[r].lo : c0;
      const int jhi = rows[r].pos + 1 < c1 ? rows[r].pos + 1 : c1;
      if (jlo >= jhi) continue;
      const float* q = qs + static_cast<int64_t>(r) * d;
      dot_keys<L>(q, kp + (jlo - c0), jhi - jlo, d, sc);
      float cmax = -INFINITY;
      for (int j = 0; j < jhi - jlo; ++j) cmax = sc[j] > cmax ? sc[j] : cmax;
      const float m_new = cmax > mx[r] ? cmax : mx[r];
      const float rescale = mx[r] == -INFINITY ? 0.0f : std::exp(mx[r] - m_new);
      mx[r] = m_new;
      sum[r] = sum[r] * rescale + exp_shifted(sc, jhi - jlo, m_new);
      accumulate_values<L>(acc + static_cast<int64_t>(r) * d, rescale, sc, vp + (jlo - c0), jhi - jlo, d);
    }
  }
  for (int i = it.i0; i < it.i1; ++i) {
    const int64_t t = p.q_start[it.seq] + i;
    for (int g = 0; g < group; ++g) {
      const int r = (i - it.i0) * group + g;
      float* out = static_cast<float*>(p.out) + t * p.ld_out + static_cast<int64_t>(it.kv_head * group + g) * d;
      const float inv = 1.0f / sum[r];
      for (int e = 0; e < d; ++e) out[e] = acc[static_cast<int64_t>(r) * d + e] * inv;
    }
  }
}

void attention(const ops::AttentionParams& p, const AttentionItem& item, float* scratch) {
  switch (p.cache.cache_dtype) {
    case DType::kBF16: return attention_typed<LoadBF16>(p, item, scratch);
    case DType::kF32: return attention_typed<LoadF32>(p, item, scratch);
    case DType::kF16: FRUGAL_CPU_NON_FLOAT_DTYPES: break;
  }
  unreachable_dtype("attention", p.cache.cache_dtype);
}

}  // namespace frugal::cpu::FRUGAL_CPU_ISA
