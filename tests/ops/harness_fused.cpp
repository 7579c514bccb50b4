// The op harness cases of the fused ops (ops/op_list.h FRUGAL_FUSED_OPS): each is its sequence of
// ops, so ops::ref runs that sequence on the same host inputs. The cases use the model's data
// flow (what a backend may fuse) on odd shapes, and one other layout that must run as the plain
// sequence.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "harness.h"
#include "ops/quant/quant_weight.h"
#include "ops/reference.h"
#include "ops/weight_format_check.h"

namespace frugal::testing {
namespace {

// Router inputs whose logits are exact in any float dtype (the moe_router and moe_block cases):
// the rows of x are a_t v, with v in {+-1}^k, |a_t| in [0.5, 1.5] and alternating signs; the rows
// of w are s_e c v, with s_e = (perm(e) - E / 2) / 256 (distinct, 8 bits) and c the power of two
// nearest 4 / k. After an RMSNorm of weight 2 each token's logits are +-2 k c s_e (within about
// [-5, 5]) up to one factor a token, so every backend and the reference route alike.
void fill_exact_router(std::mt19937& rng, HostMat& x, HostMat& w) {
  const int64_t k = x.cols, E = w.rows;
  std::vector<float> v(static_cast<size_t>(k));
  for (float& f : v) f = (rng() & 1) ? 1.0f : -1.0f;
  std::vector<int32_t> perm(static_cast<size_t>(E));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  const float c_scale = std::exp2(-std::round(std::log2(static_cast<float>(k) / 4.0f)));
  std::uniform_real_distribution<float> a_dist(0.5f, 1.5f);
  for (int64_t t = 0; t < x.rows; ++t) {
    const float a = (t % 2 ? -1.0f : 1.0f) * a_dist(rng);
    for (int64_t j = 0; j < k; ++j) x.set(t, j, a * v[static_cast<size_t>(j)]);
  }
  for (int64_t e = 0; e < E; ++e) {
    const float s = static_cast<float>(perm[static_cast<size_t>(e)] - E / 2) / 256.0f;  // 8 bits: exact
    for (int64_t j = 0; j < k; ++j) w.set(e, j, s * c_scale * v[static_cast<size_t>(j)]);
  }
}

std::string tag(DType t) { return dtype_name(t); }

std::vector<float> rope_inv_freq(int32_t rotary_dim) {
  std::vector<float> f(static_cast<size_t>(rotary_dim / 2));
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / rotary_dim));
  return f;
}

// A decode step's cache slots (distinct, shuffled over n_slots; token 1 a padding token, slot -1,
// rotated but not written) and RoPE positions for n_tokens tokens.
void random_slots_and_positions(std::mt19937& rng, int64_t n_slots, int64_t n_tokens, std::vector<int32_t>* slots,
                                std::vector<int32_t>* pos) {
  std::uniform_int_distribution<int32_t> pos_dist(0, 40000);
  slots->resize(static_cast<size_t>(n_slots));
  std::iota(slots->begin(), slots->end(), 0);
  std::shuffle(slots->begin(), slots->end(), rng);
  slots->resize(static_cast<size_t>(n_tokens));
  if (n_tokens > 1) (*slots)[1] = -1;
  pos->resize(static_cast<size_t>(n_tokens));
  for (auto& v : *pos) v = pos_dist(rng);
}

// FP8 weights [n, k] with per-channel scales over random e4m3 codes (|v| < 2, never NaN), and
// their dequantized values (what the reference multiplies).
quant::QuantWeight random_fp8_weight(std::mt19937& rng, int64_t n, int64_t k, std::vector<float>* deq) {
  quant::QuantWeight qw = quant::make_quant_weight(quant::CodeKind::kF8, n, k, (k + 31) / 32 * 32, 1);
  qw.name = "harness";
  qw.spec.source = quant::SourceFormat::kFp8Block;
  std::uniform_int_distribution<int> code(0, 0xfe);
  for (int64_t o = 0; o < n; ++o)
    for (int64_t j = 0; j < k; ++j) {
      int c = 0;
      do c = code(rng) & 0xbf; while ((c & 0x7f) == 0x7f);
      quant::set_code(qw, o, j, c);
    }
  std::uniform_real_distribution<float> s(0.1f, 0.3f);
  for (float& v : qw.scale) v = s(rng);
  *deq = quant::dequantize(qw);
  return qw;
}

// A fused case's weight operand on the device: w itself, or (fp8) random FP8 codes [w.rows,
// w.cols] with per-channel scales in w's place. `ref` is what the reference multiplies (w, or the
// FP8 weight dequantized to f32); `ok` is false when the FP8 view could not be built (recorded).
struct CaseWeight {
  quant::QuantWeight qw;
  std::vector<float> deq;
  std::unique_ptr<GuardedBuffer> data, scales;
  ops::WeightView view, ref;
  bool ok = true;
};

CaseWeight case_weight(OpCases& c, const HostMat& w, bool fp8) {
  CaseWeight cw;
  if (fp8) cw.qw = random_fp8_weight(c.rng(), w.rows, w.cols, &cw.deq);
  cw.data = fp8 ? c.upload(cw.qw.q) : c.upload(w);
  cw.scales = c.upload(fp8 ? cw.qw.scale : std::vector<float>{0.f});
  cw.view = ops::dense_weight(cw.data->ptr(), w.dtype);
  cw.ref = fp8 ? ops::dense_weight(cw.deq.data(), DType::kF32) : ops::dense_weight(w.data(), w.dtype);
  if (fp8) {
    Result<ops::WeightView> host_view = quant::weight_view_of(cw.qw);
    cw.ok = host_view.is_ok();
    EXPECT_TRUE(cw.ok) << host_view.status().to_string();
    if (cw.ok) {
      cw.view = *host_view;
      cw.view.data = cw.data->ptr();
      cw.view.scales = cw.scales->ptr();
    }
  }
  return cw;
}

}  // namespace

// Rows [q | k | v] per token as the fused qkv projection writes them (kv.k is rope.k), every KV
// cache dtype, full and partial rotary dims, head_dim 10 (rotary_dim % 4 != 0), interleaved
// pairs, padding tokens (slot -1); "separate k": kv_write reads another, unrotated k buffer.
// q and k must match ref::rope (within the activation tolerance); the cache must equal, exactly,
// ref::kv_write of the keys the backend rotated (or of the separate k) and of v: one rounding to
// the activation dtype comes before the cache's own rounding or quantization.
void OpCases::rope_kv_write() {
  int variant = 0;
  struct Dims {
    int32_t head_dim, rotary_dim;
  };
  for (DType cache_t : {DType::kF32, DType::kBF16, DType::kF8E4M3, DType::kI8})
    for (Dims d : {Dims{128, 128}, Dims{64, 32}, Dims{12, 12}, Dims{10, 10}})
      for (int32_t n_tokens : {1, 5})
        for (bool separate_k : {false, true}) {
          if (separate_k && (n_tokens == 1 || d.head_dim != 64)) continue;
          const int32_t n_head = 3 + variant % 2 * 3, n_head_kv = 2, block_size = 5, n_blocks = 6;
          const bool interleaved = variant % 7 == 6, int8 = cache_t == DType::kI8, fp8 = cache_t == DType::kF8E4M3;
          const float factor = variant % 3 == 2 ? 1.25f : 1.0f;
          const int64_t q_dim = int64_t{n_head} * d.head_dim, kv_dim = int64_t{n_head_kv} * d.head_dim;
          const int64_t width = q_dim + 2 * kv_dim, gap = variant++ % 2 ? 6 : 0;
          const std::string what = "rope_kv_write cache=" + tag(cache_t) + " head_dim=" + std::to_string(d.head_dim) +
                                   " rotary_dim=" + std::to_string(d.rotary_dim) + " n_head=" + std::to_string(n_head) +
                                   " n_tokens=" + std::to_string(n_tokens) + " gap=" + std::to_string(gap) +
                                   (interleaved ? " interleaved" : "") + (separate_k ? " separate k" : "");
          HostMat qkv(act(), n_tokens, width, width + gap), k2(act(), n_tokens, kv_dim, kv_dim + gap);
          qkv.fill_random(rng_, 1.0f);
          k2.fill_random(rng_, 1.0f);
          if (d.head_dim == 12)  // an all-zero k head: it rotates to zeros (int8 scale 0)
            for (int e = 0; e < d.head_dim; ++e) qkv.set(0, q_dim + e, 0.0f);
          if (fp8) qkv.set(n_tokens - 1, q_dim + kv_dim, 300.0f);  // past e4m3's 448 once scaled: saturates
          const int64_t n_slots = int64_t{n_blocks} * block_size;
          HostMat kc(cache_t, n_slots, kv_dim, kv_dim), vc(cache_t, n_slots, kv_dim, kv_dim);
          kc.fill_random(rng_, int8 ? 100.0f : 1.0f);
          vc.fill_random(rng_, int8 ? 100.0f : 1.0f);
          HostMat ks(DType::kF32, n_slots, n_head_kv, n_head_kv), vs = ks;
          ks.fill_random(rng_, 1.0f);
          vs.fill_random(rng_, 1.0f);
          std::vector<int32_t> slots, pos;
          random_slots_and_positions(rng_, n_slots, n_tokens, &slots, &pos);
          const std::vector<float> inv_freq = rope_inv_freq(d.rotary_dim);
          auto dqkv = upload(qkv), dk2 = upload(k2), dkc = upload(kc), dvc = upload(vc), dks = upload(ks),
               dvs = upload(vs), dslots = upload(slots), dpos = upload(pos), dfreq = upload(inv_freq);
          auto at = [&](void* base, int64_t col) { return static_cast<uint8_t*>(base) + dtype_bytes(act(), col); };
          ops::RopeKvWriteParams p{
              .rope = {.q = dqkv->ptr(), .k = at(dqkv->ptr(), q_dim), .act_dtype = act(),
                       .positions = static_cast<const int32_t*>(dpos->ptr()),
                       .inv_freq = static_cast<const float*>(dfreq->ptr()), .n_tokens = n_tokens, .ld_q = qkv.ld,
                       .ld_k = qkv.ld, .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = d.head_dim,
                       .rotary_dim = d.rotary_dim, .attention_factor = factor, .interleaved = interleaved},
              .kv = {.cache = {.k_cache = dkc->ptr(), .v_cache = dvc->ptr(), .cache_dtype = cache_t, .n_blocks = n_blocks,
                               .block_size = block_size, .n_head_kv = n_head_kv, .head_dim = d.head_dim,
                               .k_scales = int8 ? static_cast<float*>(dks->ptr()) : nullptr,
                               .v_scales = int8 ? static_cast<float*>(dvs->ptr()) : nullptr,
                               .k_scale = fp8 ? 0.5f : 1.0f, .v_scale = fp8 ? 0.0625f : 1.0f},
                     .k = separate_k ? dk2->ptr() : at(dqkv->ptr(), q_dim), .v = at(dqkv->ptr(), q_dim + kv_dim),
                     .act_dtype = act(), .ld_k = separate_k ? k2.ld : qkv.ld, .ld_v = qkv.ld,
                     .slot_mapping = static_cast<const int32_t*>(dslots->ptr()), .n_tokens = n_tokens}};
          if (!ran(backend()->rope_kv_write(p), ops::OpKind::kRopeKvWrite, "cache=" + tag(cache_t), what)) continue;
          HostMat got_qkv = download(*dqkv, qkv), got_kc = download(*dkc, kc), got_vc = download(*dvc, vc);
          HostMat got_ks = download(*dks, ks), got_vs = download(*dvs, vs);
          // q and k against the reference rope.
          HostMat want_qkv = qkv;
          ops::RopeParams r = p.rope;
          r.q = want_qkv.data(), r.k = at(want_qkv.data(), q_dim), r.positions = pos.data(), r.inv_freq = inv_freq.data();
          ops::ref::rope(r);
          EXPECT_TRUE(compare_mats(got_qkv, want_qkv, qkv, act_tol(), what + " (q, k, v rows)"));
          // The cache: ref::kv_write of the keys as rotated by the backend (or the separate k) and v.
          HostMat want_kc = kc, want_vc = vc, want_ks = ks, want_vs = vs;
          ops::KvWriteParams w = p.kv;
          w.cache.k_cache = want_kc.data(), w.cache.v_cache = want_vc.data();
          if (int8) w.cache.k_scales = static_cast<float*>(want_ks.data()), w.cache.v_scales = static_cast<float*>(want_vs.data());
          w.k = separate_k ? k2.data() : static_cast<const void*>(at(got_qkv.data(), q_dim));
          w.v = at(qkv.data(), q_dim + kv_dim);
          w.slot_mapping = slots.data();
          ops::ref::kv_write(w);
          EXPECT_TRUE(compare_mats(got_kc, want_kc, kc, 0.0, what + " (k cache)"));
          EXPECT_TRUE(compare_mats(got_vc, want_vc, vc, 0.0, what + " (v cache)"));
          EXPECT_TRUE(compare_mats(got_ks, want_ks, ks, 0.0, what + " (k scales)"));
          EXPECT_TRUE(compare_mats(got_vs, want_vs, vs, 0.0, what + " (v scales)"));
          for (auto* b : {dqkv.get(), dk2.get(), dkc.get(), dvc.get(), dks.get(), dvs.get(), dslots.get(), dpos.get(), dfreq.get()})
            EXPECT_TRUE(b->check_guards(what));
        }
}

// SwiGLU's gate_up projection: weight rows [gate | up], act over the two halves of y (what a
// backend may fuse into the matmul's epilogue), GEMV and GEMM sizes, odd n / 2 and k, every dense
// float dtype and FP8 (per channel) weights, bias, row gaps; "separate": act reads two other
// buffers (the sequence as written). act.out must match ref::matmul then ref::silu_mul; mm.y is
// scratch (not compared; its guards are).
void OpCases::matmul_silu_mul() {
  int variant = 0;
  auto run_case = [&](int64_t m, int64_t half, int64_t k, DType wt, bool fp8, bool separate) {
    const bool has_bias = variant % 3 != 1;
    const int64_t x_gap = variant % 2 ? 3 : 0, y_gap = variant % 5 < 2 ? 5 : 0, out_gap = variant % 4 == 1 ? 2 : 0;
    ++variant;
    const int64_t n = 2 * half;
    std::string what = "matmul_silu_mul m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                       " w=" + (fp8 ? std::string("fp8") : tag(wt)) + (has_bias ? " bias" : "") +
                       (separate ? " separate" : "") + " ld_x=" + std::to_string(k + x_gap);
    HostMat x(act(), m, k, k + x_gap), w(wt, n, k, k), bias(act(), 1, n, n), y0(act(), m, n, n + y_gap);
    HostMat g2(act(), m, half, half), u2(act(), m, half, half), out0(act(), m, half, half + out_gap);
    x.fill_random(rng_, 1.0f);
    w.fill_random(rng_, 0.5f);
    bias.fill_random(rng_, 1.0f);
    y0.fill_random(rng_, 1.0f);
    g2.fill_random(rng_, 4.0f);
    u2.fill_random(rng_, 1.0f);
    out0.fill_random(rng_, 1.0f);
    const CaseWeight cw = case_weight(*this, w, fp8);
    if (!cw.ok) return;
    const ops::WeightView& wv = cw.view;
    auto dx = upload(x), db = upload(bias), dy = upload(y0), dg2 = upload(g2), du2 = upload(u2), dout = upload(out0);
    auto y_at = [&](void* base, int64_t col) { return static_cast<uint8_t*>(base) + dtype_bytes(act(), col); };
    ops::MatmulSiluMulParams p{
        .mm = {.x = dx->ptr(), .x_dtype = act(), .ld_x = x.ld, .w = wv, .bias = has_bias ? db->ptr() : nullptr,
               .bias_dtype = act(), .y = dy->ptr(), .y_dtype = act(), .ld_y = y0.ld, .m = m, .n = n, .k = k,
               .accumulate = false},
        .act = {.gate = separate ? dg2->ptr() : dy->ptr(), .up = separate ? du2->ptr() : y_at(dy->ptr(), half),
                .out = dout->ptr(), .act_dtype = act(), .n_tokens = m, .dim = half, .ld_gate = separate ? g2.ld : y0.ld,
                .ld_up = separate ? u2.ld : y0.ld, .ld_out = out0.ld}};
    const std::string variant_name = "w=" + ops::weight_format_name(wv.format);
    if (!ran(backend()->matmul_silu_mul(p), ops::OpKind::kMatmulSiluMul, variant_name, what)) return;
    HostMat got = download(*dout, out0), want_y = y0, want = out0;
    ops::MatmulSiluMulParams r = p;
    r.mm.x = x.data(), r.mm.bias = has_bias ? bias.data() : nullptr;
    r.mm.w = cw.ref;
    r.mm.y = want_y.data();
    r.act.gate = separate ? g2.data() : want_y.data(), r.act.up = separate ? u2.data() : y_at(want_y.data(), half);
    r.act.out = want.data();
    ops::ref::matmul_silu_mul(r);
    EXPECT_TRUE(compare_mats(got, want, out0, act_tol(), what));
    for (auto* b : {dx.get(), cw.data.get(), db.get(), dy.get(), dg2.get(), du2.get(), dout.get(), cw.scales.get()})
      EXPECT_TRUE(b->check_guards(what));
  };
  for (DType wt : {DType::kF32, DType::kBF16, DType::kF16})
    for (int64_t m : {1, 3, 8, 9, 33})
      for (int64_t half : {13, 64, 67})
        for (int64_t k : {64, 67, 136}) run_case(m, half, k, wt, false, false);
  for (int64_t m : {1, 5, 8})
    for (int64_t half : {16, 67}) run_case(m, half, 128, DType::kF32, true, false);
  run_case(2, 64, 64, act(), false, true);
  run_case(1, 13, 136, DType::kBF16, false, true);
}

// SwiGLU's down projection over silu(gate) * up: act over the [gate | up] halves of one buffer,
// mm.x = act.out (what a backend may fuse into the matmul's input, e.g. into its activation
// quantization), accumulate into y as the model does and not, odd dims and k, bias, row gaps,
// every dense float dtype and FP8 (per channel) weights; "separate": mm.x is another buffer (the
// sequence as written). mm.y must match ref::silu_mul then ref::matmul; act.out is scratch (not
// compared; its guards are).
void OpCases::silu_mul_matmul() {
  int variant = 0;
  auto run_case = [&](int64_t m, int64_t n, int64_t dim, DType wt, bool fp8, bool separate) {
    const bool has_bias = variant % 3 == 1, accumulate = variant % 2 == 0;
    const int64_t gu_gap = variant % 5 < 2 ? 5 : 0, out_gap = variant % 4 == 1 ? 2 : 0, y_gap = variant % 3 ? 3 : 0;
    ++variant;
    std::string what = "silu_mul_matmul m=" + std::to_string(m) + " n=" + std::to_string(n) + " dim=" + std::to_string(dim) +
                       " w=" + (fp8 ? std::string("fp8") : tag(wt)) + (has_bias ? " bias" : "") +
                       (accumulate ? " accumulate" : "") + (separate ? " separate" : "");
    HostMat gu(act(), m, 2 * dim, 2 * dim + gu_gap), h0(act(), m, dim, dim + out_gap), x2(act(), m, dim, dim);
    HostMat w(wt, n, dim, dim), bias(act(), 1, n, n), y0(act(), m, n, n + y_gap);
    gu.fill_random(rng_, 3.0f);
    h0.fill_random(rng_, 1.0f);
    x2.fill_random(rng_, 1.0f);
    w.fill_random(rng_, 0.5f);
    bias.fill_random(rng_, 1.0f);
    y0.fill_random(rng_, 1.0f);
    const CaseWeight cw = case_weight(*this, w, fp8);
    if (!cw.ok) return;
    const ops::WeightView& wv = cw.view;
    auto dgu = upload(gu), dh = upload(h0), dx2 = upload(x2), db = upload(bias), dy = upload(y0);
    auto at = [&](void* base, int64_t col) { return static_cast<uint8_t*>(base) + dtype_bytes(act(), col); };
    ops::SiluMulMatmulParams p{
        .act = {.gate = dgu->ptr(), .up = at(dgu->ptr(), dim), .out = dh->ptr(), .act_dtype = act(), .n_tokens = m,
                .dim = dim, .ld_gate = gu.ld, .ld_up = gu.ld, .ld_out = h0.ld},
        .mm = {.x = separate ? dx2->ptr() : dh->ptr(), .x_dtype = act(), .ld_x = separate ? x2.ld : h0.ld, .w = wv,
               .bias = has_bias ? db->ptr() : nullptr, .bias_dtype = act(), .y = dy->ptr(), .y_dtype = act(),
               .ld_y = y0.ld, .m = m, .n = n, .k = dim, .accumulate = accumulate}};
    const std::string variant_name = "w=" + ops::weight_format_name(wv.format);
    if (!ran(backend()->silu_mul_matmul(p), ops::OpKind::kSiluMulMatmul, variant_name, what)) return;
    HostMat got = download(*dy, y0), want_h = h0, want = y0;
    ops::SiluMulMatmulParams r = p;
    r.act.gate = gu.data(), r.act.up = at(gu.data(), dim), r.act.out = want_h.data();
    r.mm.x = separate ? x2.data() : want_h.data(), r.mm.bias = has_bias ? bias.data() : nullptr;
    r.mm.w = cw.ref;
    r.mm.y = want.data();
    ops::ref::silu_mul_matmul(r);
    EXPECT_TRUE(compare_mats(got, want, y0, act_tol(), what));
    for (auto* b : {dgu.get(), dh.get(), dx2.get(), cw.data.get(), db.get(), dy.get(), cw.scales.get()})
      EXPECT_TRUE(b->check_guards(what));
  };
  for (DType wt : {DType::kF32, DType::kBF16, DType::kF16})
    for (int64_t m : {1, 3, 9, 33})
      for (int64_t n : {13, 64})
        for (int64_t dim : {64, 67, 136}) run_case(m, n, dim, wt, false, false);
  for (int64_t m : {1, 5, 8})
    for (int64_t n : {16, 67}) run_case(m, n, 128, DType::kF32, true, false);
  run_case(2, 64, 64, act(), false, true);
  run_case(9, 13, 136, DType::kBF16, false, true);
}

// MLA's latent-row prologue as DeepSeek lays it out (model/deepseek.cpp): kv rows [c | k_pe] (c
// normalized in place, k_pe rotated in place, the row written to a latent cache whose k_cache is
// v_cache, one kv head), q heads of [q_nope | q_pe] (q_pe rotated); V2-Lite's widths (c 512,
// rope 64, nope 128, 16 heads) and small ones (c 24, rope 8, 3 heads), interleaved and
// rotate_half pairs, attention_factor, odd token counts with a padding token (slot -1), row gaps,
// every KV cache dtype; c of 20 (not a multiple of 8) and a separate norm output run as the plain
// sequence. The rows and q must match ref::rms_norm then ref::rope (within the activation
// tolerance); the cache must equal, exactly, ref::kv_write of the rows the backend left.
void OpCases::mla_kv_prologue() {
  int variant = 0;
  std::uniform_int_distribution<int32_t> pos_dist(0, 40000);
  struct Dims {
    int32_t dim, rot, nope, n_head;
  };
  for (DType cache_t : {DType::kF32, DType::kBF16, DType::kF8E4M3, DType::kI8})
    for (Dims d : {Dims{512, 64, 128, 16}, Dims{24, 8, 4, 3}, Dims{20, 4, 6, 3}})
      for (int32_t n_tokens : {1, 5})
        for (bool separate_y : {false, true}) {
          if (separate_y && (d.dim != 24 || n_tokens == 1)) continue;
          const bool interleaved = variant % 2 == 0, int8 = cache_t == DType::kI8, fp8 = cache_t == DType::kF8E4M3;
          const float factor = variant % 3 == 2 ? 1.25f : 1.0f;
          const int64_t lat = d.dim + d.rot, qk = d.nope + d.rot, q_w = int64_t{d.n_head} * qk;
          const int64_t gap = variant++ % 2 ? 8 : 0;
          const int32_t block_size = 4, n_blocks = 5;
          const std::string what = "mla_kv_prologue cache=" + tag(cache_t) + " dim=" + std::to_string(d.dim) +
                                   " rotary_dim=" + std::to_string(d.rot) + " n_head=" + std::to_string(d.n_head) +
                                   " n_tokens=" + std::to_string(n_tokens) + " gap=" + std::to_string(gap) +
                                   (interleaved ? " interleaved" : "") + (separate_y ? " separate y" : "");
          HostMat kva(act(), n_tokens, lat, lat + gap), q(act(), n_tokens, q_w, q_w + gap), wn(act(), 1, d.dim, d.dim);
          HostMat y2(act(), n_tokens, d.dim, d.dim);
          kva.fill_random(rng_, 2.0f);
          q.fill_random(rng_, 1.0f);
          wn.fill_random(rng_, 1.5f);
          y2.fill_random(rng_, 1.0f);
          const int64_t n_slots = int64_t{n_blocks} * block_size;
          HostMat cache(cache_t, n_slots, lat, lat);
          cache.fill_random(rng_, int8 ? 100.0f : 1.0f);
          HostMat ks(DType::kF32, n_slots, 1, 1), vs = ks;
          ks.fill_random(rng_, 1.0f);
          vs.fill_random(rng_, 1.0f);
          std::vector<int32_t> slots(static_cast<size_t>(n_slots)), pos(static_cast<size_t>(n_tokens));
          std::iota(slots.begin(), slots.end(), 0);
          std::shuffle(slots.begin(), slots.end(), rng_);
          slots.resize(static_cast<size_t>(n_tokens));
          if (n_tokens > 1) slots[2] = -1;  // a padding token: normalized and rotated, not written
          for (auto& v : pos) v = pos_dist(rng_);
          const std::vector<float> inv_freq = rope_inv_freq(d.rot);
          auto dkva = upload(kva), dq = upload(q), dwn = upload(wn), dy2 = upload(y2), dcache = upload(cache),
               dks = upload(ks), dvs = upload(vs), dslots = upload(slots), dpos = upload(pos), dfreq = upload(inv_freq);
          auto at = [&](void* base, int64_t col) { return static_cast<uint8_t*>(base) + dtype_bytes(act(), col); };
          ops::MlaKvPrologueParams p{
              .norm = {.x = dkva->ptr(), .residual = nullptr, .y = separate_y ? dy2->ptr() : dkva->ptr(),
                       .weight = dwn->ptr(), .act_dtype = act(), .weight_dtype = act(), .rows = n_tokens, .dim = d.dim,
                       .ld_x = kva.ld, .ld_res = kva.ld, .ld_y = separate_y ? y2.ld : kva.ld, .eps = 1e-6f},
              .rope = {.q = at(dq->ptr(), d.nope), .k = at(dkva->ptr(), d.dim), .act_dtype = act(),
                       .positions = static_cast<const int32_t*>(dpos->ptr()),
                       .inv_freq = static_cast<const float*>(dfreq->ptr()), .n_tokens = n_tokens, .ld_q = q.ld,
                       .ld_k = kva.ld, .n_head = d.n_head, .n_head_kv = 1, .head_dim = static_cast<int32_t>(qk),
                       .rotary_dim = d.rot, .attention_factor = factor, .interleaved = interleaved},
              .kv = {.cache = {.k_cache = dcache->ptr(), .v_cache = dcache->ptr(), .cache_dtype = cache_t,
                               .n_blocks = n_blocks, .block_size = block_size, .n_head_kv = 1,
                               .head_dim = static_cast<int32_t>(lat),
                               .k_scales = int8 ? static_cast<float*>(dks->ptr()) : nullptr,
                               .v_scales = int8 ? static_cast<float*>(dvs->ptr()) : nullptr,
                               .k_scale = fp8 ? 0.25f : 1.0f, .v_scale = fp8 ? 0.25f : 1.0f},
                     .k = dkva->ptr(), .v = dkva->ptr(), .act_dtype = act(), .ld_k = kva.ld, .ld_v = kva.ld,
                     .slot_mapping = static_cast<const int32_t*>(dslots->ptr()), .n_tokens = n_tokens}};
          if (!ran(backend()->mla_kv_prologue(p), ops::OpKind::kMlaKvPrologue, "cache=" + tag(cache_t), what)) continue;
          HostMat got_kva = download(*dkva, kva), got_q = download(*dq, q), got_y2 = download(*dy2, y2);
          HostMat got_cache = download(*dcache, cache), got_ks = download(*dks, ks), got_vs = download(*dvs, vs);
          // Rows, q (and the separate norm output) against the reference norm and rope.
          HostMat want_kva = kva, want_q = q, want_y2 = y2;
          ops::RmsNormParams nr = p.norm;
          nr.x = want_kva.data(), nr.y = separate_y ? want_y2.data() : want_kva.data(), nr.weight = wn.data();
          ops::ref::rms_norm(nr);
          ops::RopeParams r = p.rope;
          r.q = at(want_q.data(), d.nope), r.k = at(want_kva.data(), d.dim), r.positions = pos.data(),
          r.inv_freq = inv_freq.data();
          ops::ref::rope(r);
          EXPECT_TRUE(compare_mats(got_kva, want_kva, kva, act_tol(), what + " (kv rows)"));
          EXPECT_TRUE(compare_mats(got_q, want_q, q, act_tol(), what + " (q)"));
          EXPECT_TRUE(compare_mats(got_y2, want_y2, y2, act_tol(), what + " (separate norm output)"));
          // The cache: ref::kv_write of the rows as the backend left them.
          HostMat want_cache = cache, want_ks = ks, want_vs = vs;
          ops::KvWriteParams w = p.kv;
          w.cache.k_cache = w.cache.v_cache = want_cache.data();
          if (int8) w.cache.k_scales = static_cast<float*>(want_ks.data()), w.cache.v_scales = static_cast<float*>(want_vs.data());
          w.k = w.v = got_kva.data();
          w.slot_mapping = slots.data();
          ops::ref::kv_write(w);
          EXPECT_TRUE(compare_mats(got_cache, want_cache, cache, 0.0, what + " (cache)"));
          EXPECT_TRUE(compare_mats(got_ks, want_ks, ks, 0.0, what + " (k scales)"));
          EXPECT_TRUE(compare_mats(got_vs, want_vs, vs, 0.0, what + " (v scales)"));
          for (auto* b : {dkva.get(), dq.get(), dwn.get(), dy2.get(), dcache.get(), dks.get(), dvs.get(), dslots.get(),
                          dpos.get(), dfreq.get()})
            EXPECT_TRUE(b->check_guards(what));
        }
}

// DeepSeekMoE's router: the input norm of the act-dtype hidden rows, f32 logits from it and the
// router weights, then routing, every method of moe_route (V2-Lite, V2 and V3 shapes and an odd
// small one), 1..9 tokens, a row gap in x, in the norm's output and in the logits. The logits are
// built far apart: x[t] = a_t v for a random sign vector v (so rms_norm(x[t]) = sign(a_t) g v for
// the norm weight g = 2) and router row e = s_e c v, s_e a shuffled ladder of bf16-exact values, so
// no two experts of a token are within rounding (s_e c is exact in bf16: steps of c / 256) and the
// choices must equal the reference's exactly; the norm's output and the logits to act_tol, weights
// to 1e-4 of the scale. "separate": route reads another buffer than mm.y (the sequence as written).
void OpCases::moe_router() {
  struct Case { ops::MoeScoring scoring; ops::MoeTopk method; int32_t n_experts, top_k, n_group, topk_group; bool bias, norm; float scale; int64_t k; };
  const Case cases[] = {
      {ops::MoeScoring::kSoftmax, ops::MoeTopk::kGreedy, 64, 6, 1, 1, false, false, 1.0f, 2048},
      {ops::MoeScoring::kSoftmax, ops::MoeTopk::kGreedy, 16, 4, 1, 1, false, true, 1.0f, 136},
      {ops::MoeScoring::kSoftmax, ops::MoeTopk::kGroupLimitedGreedy, 160, 6, 8, 3, false, false, 16.0f, 520},
      {ops::MoeScoring::kSigmoid, ops::MoeTopk::kNoauxTc, 256, 8, 8, 4, true, true, 2.5f, 7168},
  };
  int variant = 0;
  auto run_case = [&](const Case& c, int64_t m, DType wt, bool separate) {
    const int64_t E = c.n_experts, K = c.top_k, k = c.k, x_gap = variant % 2 ? 8 : 0, l_gap = variant % 3 == 1 ? 3 : 0;
    ++variant;
    const std::string what = "moe_router experts=" + std::to_string(E) + " top_k=" + std::to_string(K) +
                             " groups=" + std::to_string(c.n_group) + " k=" + std::to_string(k) + " m=" + std::to_string(m) +
                             " w=" + tag(wt) + (separate ? " separate" : "");
    HostMat x(act(), m, k, k + x_gap), xn0(act(), m, k, k + 2 * x_gap), nw(act(), 1, k, k), w(wt, E, k, k);
    HostMat y0(DType::kF32, m, E, E + l_gap), other(DType::kF32, m, E, E + l_gap);
    fill_exact_router(rng_, x, w);
    xn0.fill_random(rng_, 1.0f);
    for (int64_t j = 0; j < k; ++j) nw.set(0, j, 2.0f);
    y0.fill_random(rng_, 1.0f);
    for (int64_t t = 0; t < m; ++t)  // the separate logits: another ladder per token
      for (int64_t e = 0; e < E; ++e) other.set(t, e, -4.0f + 8.0f * static_cast<float>((e * 7 + t) % E) / static_cast<float>(E));
    std::vector<float> bias(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) bias[static_cast<size_t>(e)] = 0.001f * static_cast<float>(e % 7);
    std::vector<int32_t> idx0(static_cast<size_t>(m * K), -1);
    std::vector<float> w0(static_cast<size_t>(m * K), -1.0f), dense0(static_cast<size_t>(m * E), -1.0f);
    auto dx = upload(x), dxn = upload(xn0), dnw = upload(nw), dw = upload(w), dy = upload(y0), dother = upload(other),
         db = upload(bias), di = upload(idx0), dwt = upload(w0), dd = upload(dense0);
    ops::MoeRouterParams p{
        .norm = {.x = dx->ptr(), .residual = nullptr, .y = dxn->ptr(), .weight = dnw->ptr(), .act_dtype = act(),
                 .weight_dtype = act(), .rows = m, .dim = k, .ld_x = x.ld, .ld_res = x.ld, .ld_y = xn0.ld, .eps = 1e-6f},
        .mm = {.x = dxn->ptr(), .x_dtype = act(), .ld_x = xn0.ld, .w = ops::dense_weight(dw->ptr(), wt), .bias = nullptr,
               .bias_dtype = DType::kF32, .y = dy->ptr(), .y_dtype = DType::kF32, .ld_y = y0.ld, .m = m, .n = E, .k = k,
               .accumulate = false},
        .route = {.logits = static_cast<const float*>(separate ? dother->ptr() : dy->ptr()), .ld_logits = y0.ld,
                  .bias = c.bias ? db->ptr() : nullptr, .bias_dtype = DType::kF32, .n_tokens = m, .n_experts = c.n_experts,
                  .top_k = c.top_k, .n_group = c.n_group, .topk_group = c.topk_group, .scoring = c.scoring,
                  .method = c.method, .norm_topk_prob = c.norm, .routed_scaling_factor = c.scale,
                  .topk_idx = static_cast<int32_t*>(di->ptr()), .topk_weight = static_cast<float*>(dwt->ptr()),
                  .dense_weight = static_cast<float*>(dd->ptr())}};
    if (!ran(backend()->moe_router(p), ops::OpKind::kMoeRouter, "w=" + tag(wt), what)) return;
    HostMat got_y = download(*dy, y0), want_y = y0, got_xn = download(*dxn, xn0), want_xn = xn0;
    std::vector<int32_t> got_idx(idx0.size()), want_idx = idx0;
    std::vector<float> got_w(w0.size()), got_d(dense0.size()), want_w = w0, want_d = dense0;
    auto bytes_of = [](const GuardedBuffer& b, void* dst, size_t n) { const auto bytes = b.download(); std::memcpy(dst, bytes.data(), n); };
    bytes_of(*di, got_idx.data(), got_idx.size() * sizeof(int32_t));
    bytes_of(*dwt, got_w.data(), got_w.size() * sizeof(float));
    bytes_of(*dd, got_d.data(), got_d.size() * sizeof(float));
    ops::MoeRouterParams r = p;
    r.norm.x = x.data(), r.norm.y = want_xn.data(), r.norm.weight = nw.data();
    r.mm.x = want_xn.data(), r.mm.w = ops::dense_weight(w.data(), wt), r.mm.y = want_y.data();
    r.route.logits = static_cast<const float*>(separate ? other.data() : want_y.data());
    r.route.bias = c.bias ? bias.data() : nullptr, r.route.topk_idx = want_idx.data();
    r.route.topk_weight = want_w.data(), r.route.dense_weight = want_d.data();
    ops::ref::moe_router(r);
    EXPECT_TRUE(compare_mats(got_xn, want_xn, xn0, act_tol(), what + " (norm.y)"));
    EXPECT_TRUE(compare_mats(got_y, want_y, y0, act_tol(), what + " (logits)"));
    EXPECT_EQ(got_idx, want_idx) << what;
    for (size_t i = 0; i < got_w.size(); ++i) EXPECT_NEAR(got_w[i], want_w[i], 1e-4 * c.scale) << what << " weight " << i;
    for (size_t i = 0; i < got_d.size(); ++i) EXPECT_NEAR(got_d[i], want_d[i], 1e-4 * c.scale) << what << " dense " << i;
    for (auto* b : {dx.get(), dxn.get(), dnw.get(), dw.get(), dy.get(), dother.get(), db.get(), di.get(), dwt.get(), dd.get()})
      EXPECT_TRUE(b->check_guards(what));
  };
  for (const Case& c : cases)
    for (int64_t m : {1, 3, 8, 9}) run_case(c, m, DType::kBF16, false);
  run_case(cases[1], 2, DType::kF32, false);
  run_case(cases[0], 1, DType::kBF16, true);
  run_case(cases[3], 2, DType::kBF16, true);
}

// A DeepSeekMoE block (moe_block): the router over the block's input norm, then the grouped
// experts over its choices, in the model's data flow (experts.x is norm.y, topk_idx / topk_weight
// the route's outputs). The router's logits are exact as in moe_router's cases (x rows a_t v with
// v in {+-1}, weight rows s_e c v with distinct 8-bit s_e), so every backend routes alike; the
// experts' weights are random. Softmax greedy and sigmoid noaux_tc with groups, with and without
// shared experts, 1, 2 and 7 tokens. Every output of both ops must match ref::moe_router then
// ref::moe_experts: norm.y, the logits, topk_idx, topk_weight, dense_weight and the stream.
void OpCases::moe_block() {
  struct Case { ops::MoeScoring scoring; ops::MoeTopk method; int32_t E, K, n_group, topk_group; bool bias; int64_t hidden, inter, S; };
  const Case cases[] = {{ops::MoeScoring::kSoftmax, ops::MoeTopk::kGreedy, 8, 3, 1, 1, false, 64, 72, 48},
                        {ops::MoeScoring::kSigmoid, ops::MoeTopk::kNoauxTc, 16, 4, 4, 2, true, 136, 40, 0},
                        {ops::MoeScoring::kSoftmax, ops::MoeTopk::kGreedy, 64, 6, 1, 1, false, 256, 64, 128}};
  for (const Case& c : cases)
    for (int64_t n : {1, 2, 7}) {
      const int64_t E = c.E, K = c.K, H = c.hidden;
      const std::string what = "moe_block experts=" + std::to_string(E) + " top_k=" + std::to_string(K) +
                               " hidden=" + std::to_string(H) + " inter=" + std::to_string(c.inter) +
                               " shared=" + std::to_string(c.S) + " n=" + std::to_string(n);
      HostMat x(act(), n, H, H), xn0(act(), n, H, H), nw(act(), 1, H, H), rw(act(), E, H, H);
      HostMat logits0(DType::kF32, n, E, E), out0(act(), n, H, H);
      fill_exact_router(rng_, x, rw);
      xn0.fill_random(rng_, 1.0f);
      logits0.fill_random(rng_, 1.0f);
      for (int64_t j = 0; j < H; ++j) nw.set(0, j, 2.0f);
      // The residual stream the experts add into is the norm's input x, as in the model.
      out0 = x;
      std::vector<float> bias(static_cast<size_t>(E));
      for (int64_t e = 0; e < E; ++e) bias[static_cast<size_t>(e)] = 0.001f * static_cast<float>(e % 5);
      const ExpertWeights ew = expert_weights(E, H, c.inter, c.S);
      std::vector<int32_t> idx0(static_cast<size_t>(n * K), -1);
      std::vector<float> w0(static_cast<size_t>(n * K), -1.0f), dense0(static_cast<size_t>(n * E), -1.0f);
      const int64_t scratch_bytes = ops::moe_experts_scratch_bytes(n, static_cast<int32_t>(K), static_cast<int32_t>(E), H,
                                                                   c.inter, c.S);
      auto dres = upload(out0), dxn = upload(xn0), dnw = upload(nw), drw = upload(rw), dlog = upload(logits0),
           db = upload(bias), di = upload(idx0), dwt = upload(w0), dd = upload(dense0), dv = upload(ew.dviews),
           ds = upload(std::vector<uint8_t>(static_cast<size_t>(scratch_bytes), 0));
      // The Params over device buffers or the host copies.
      struct Bufs {
        void *res, *xn, *logits, *dense;
        const void *nw, *rw, *bias;
        int32_t* idx;
        float* wt;
        const ops::WeightView* views;
        bool device;  // the shared experts' copy
      };
      auto params = [&](const Bufs& u) {
        ops::MoeBlockParams p{
            .router = {.norm = {.x = u.res, .residual = nullptr, .y = u.xn, .weight = u.nw, .act_dtype = act(),
                                .weight_dtype = act(), .rows = n, .dim = H, .ld_x = H, .ld_res = H, .ld_y = H, .eps = 1e-6f},
                       .mm = {.x = u.xn, .x_dtype = act(), .ld_x = H, .w = ops::dense_weight(u.rw, act()), .bias = nullptr,
                              .bias_dtype = DType::kF32, .y = u.logits, .y_dtype = DType::kF32, .ld_y = E, .m = n, .n = E,
                              .k = H, .accumulate = false},
                       .route = {.logits = static_cast<const float*>(u.logits), .ld_logits = E,
                                 .bias = c.bias ? u.bias : nullptr, .bias_dtype = DType::kF32, .n_tokens = n,
                                 .n_experts = c.E, .top_k = c.K, .n_group = c.n_group, .topk_group = c.topk_group,
                                 .scoring = c.scoring, .method = c.method, .norm_topk_prob = true,
                                 .routed_scaling_factor = 1.5f, .topk_idx = u.idx, .topk_weight = u.wt,
                                 .dense_weight = static_cast<float*>(u.dense)}},
            .experts = {.x = u.xn, .act_dtype = act(), .ld_x = H, .out = u.res, .ld_out = H, .n_tokens = n, .hidden = H,
                        .inter = c.inter, .n_experts = c.E, .top_k = c.K, .topk_idx = u.idx, .topk_weight = u.wt,
                        .gate = u.views, .up = u.views + E, .down = u.views + 2 * E, .format = ew.hviews[0].format,
                        .scratch = nullptr, .scratch_bytes = scratch_bytes}};
        ew.set_shared(p.experts, u.device, true);
        return p;
      };
      ops::MoeBlockParams p = params(Bufs{dres->ptr(), dxn->ptr(), dlog->ptr(), dd->ptr(), dnw->ptr(), drw->ptr(), db->ptr(),
                                          static_cast<int32_t*>(di->ptr()), static_cast<float*>(dwt->ptr()),
                                          static_cast<const ops::WeightView*>(dv->ptr()), true});
      p.experts.scratch = ds->ptr();
      if (!ran(backend()->moe_block(p), ops::OpKind::kMoeBlock, "", what)) continue;
      HostMat got_res = download(*dres, out0), got_xn = download(*dxn, xn0), got_log = download(*dlog, logits0);
      std::vector<int32_t> got_idx(idx0.size());
      std::vector<float> got_w(w0.size()), got_d(dense0.size());
      auto bytes_of = [](const GuardedBuffer& b, void* dst, size_t nb) { const auto bytes = b.download(); std::memcpy(dst, bytes.data(), nb); };
      bytes_of(*di, got_idx.data(), got_idx.size() * sizeof(int32_t));
      bytes_of(*dwt, got_w.data(), got_w.size() * sizeof(float));
      bytes_of(*dd, got_d.data(), got_d.size() * sizeof(float));
      HostMat want_res = out0, want_xn = xn0, want_log = logits0;
      std::vector<int32_t> want_idx = idx0;
      std::vector<float> want_w = w0, want_d = dense0;
      ops::MoeBlockParams r = params(Bufs{want_res.data(), want_xn.data(), want_log.data(), want_d.data(), nw.data(),
                                          rw.data(), bias.data(), want_idx.data(), want_w.data(), ew.hviews.data(), false});
      ops::ref::moe_block(r);
      EXPECT_TRUE(compare_mats(got_xn, want_xn, xn0, act_tol(), what + " (norm.y)"));
      EXPECT_TRUE(compare_mats(got_log, want_log, logits0, act_tol(), what + " (logits)"));
      EXPECT_EQ(got_idx, want_idx) << what;
      for (size_t i = 0; i < got_w.size(); ++i) EXPECT_NEAR(got_w[i], want_w[i], 1e-4 * 1.5) << what << " weight " << i;
      for (size_t i = 0; i < got_d.size(); ++i) EXPECT_NEAR(got_d[i], want_d[i], 1e-4 * 1.5) << what << " dense " << i;
      EXPECT_TRUE(compare_mats(got_res, want_res, out0, act_tol(), what + " (residual stream)"));
      for (auto* b : {dres.get(), dxn.get(), dnw.get(), drw.get(), dlog.get(), db.get(), di.get(), dwt.get(), dd.get(),
                      dv.get(), ds.get()})
        EXPECT_TRUE(b->check_guards(what));
      EXPECT_TRUE(ew.check_guards(what));
    }
}


// A block's input norm and its first projection: mm.x is norm.y (what a backend may fuse: the
// norm in the matmul's GEMV or in its FP8 activation quantization), 1..33 rows with row gaps, dims
// a GEMV takes (multiples of 8 up to 4096, where CUDA's fused GEMV applies at one row) and odd
// ones, bias and accumulate, every dense float weight dtype and FP8 (per channel) weights;
// "separate": mm.x is another buffer (the sequence as written). mm.y must match ref::rms_norm then
// ref::matmul; norm.y is scratch (not compared; its guards are).
void OpCases::rms_norm_matmul() {
  int variant = 0;
  auto run_case = [&](int64_t m, int64_t dim, int64_t n, DType wt, bool fp8, bool separate) {
    const bool has_bias = variant % 3 == 1, accumulate = variant % 4 == 2;
    const int64_t gap = variant % 2 ? 8 : 0;
    ++variant;
    const std::string what = "rms_norm_matmul m=" + std::to_string(m) + " dim=" + std::to_string(dim) + " n=" +
                             std::to_string(n) + " w=" + (fp8 ? std::string("fp8") : tag(wt)) + (has_bias ? " bias" : "") +
                             (accumulate ? " accumulate" : "") + (separate ? " separate" : "") + " gap=" + std::to_string(gap);
    HostMat x(act(), m, dim, dim + gap), xn0(act(), m, dim, dim + gap), other(act(), m, dim, dim), nw(act(), 1, dim, dim);
    HostMat w(wt, n, dim, dim), bias(act(), 1, n, n), y0(act(), m, n, n + gap);
    x.fill_random(rng_, 2.0f);
    xn0.fill_random(rng_, 1.0f);
    other.fill_random(rng_, 1.0f);
    nw.fill_random(rng_, 1.5f);
    w.fill_random(rng_, 0.5f);
    bias.fill_random(rng_, 1.0f);
    y0.fill_random(rng_, 1.0f);
    const CaseWeight cw = case_weight(*this, w, fp8);
    if (!cw.ok) return;
    const ops::WeightView& wv = cw.view;
    auto dx = upload(x), dxn = upload(xn0), dother = upload(other), dnw = upload(nw), db = upload(bias), dy = upload(y0);
    ops::RmsNormMatmulParams p{
        .norm = {.x = dx->ptr(), .residual = nullptr, .y = dxn->ptr(), .weight = dnw->ptr(), .act_dtype = act(),
                 .weight_dtype = act(), .rows = m, .dim = dim, .ld_x = x.ld, .ld_res = x.ld, .ld_y = xn0.ld, .eps = 1e-6f},
        .mm = {.x = separate ? dother->ptr() : dxn->ptr(), .x_dtype = act(), .ld_x = separate ? other.ld : xn0.ld, .w = wv,
               .bias = has_bias ? db->ptr() : nullptr, .bias_dtype = act(), .y = dy->ptr(), .y_dtype = act(),
               .ld_y = y0.ld, .m = m, .n = n, .k = dim, .accumulate = accumulate}};
    if (!ran(backend()->rms_norm_matmul(p), ops::OpKind::kRmsNormMatmul, "w=" + ops::weight_format_name(wv.format), what))
      return;
    HostMat got_y = download(*dy, y0), want_xn = xn0, want_y = y0;
    ops::RmsNormMatmulParams r = p;
    r.norm.x = x.data(), r.norm.y = want_xn.data(), r.norm.weight = nw.data();
    r.mm.x = separate ? other.data() : want_xn.data();
    r.mm.w = cw.ref;
    r.mm.bias = has_bias ? bias.data() : nullptr, r.mm.y = want_y.data();
    ops::ref::rms_norm_matmul(r);
    // CUDA runs FP8 weights past 8 tokens as W8A8: the normalized x rounded to E4M3 per token, each
    // x_j moved by at most |x_j| / 16 (or, subnormal, amax / 448 / 1024); the bound of the matmul's
    // own W8A8 cases (harness_quant.cpp) over the reference's normalized rows.
    if (fp8 && m > 8 && backend()->name() == "cuda") {
      expect_within_fp8_act_bound(got_y, want_y, y0, want_xn, cw.deq, act_tol(), what);
    } else {
      EXPECT_TRUE(compare_mats(got_y, want_y, y0, act_tol(), what + " (mm.y)"));
    }
    for (auto* b : {dx.get(), dxn.get(), dother.get(), dnw.get(), cw.data.get(), db.get(), dy.get(), cw.scales.get()})
      EXPECT_TRUE(b->check_guards(what));
  };
  for (int64_t m : {1, 3, 9})
    for (int64_t dim : {64, 136, 2048, 4096})
      for (int64_t n : {13, 200}) run_case(m, dim, n, act(), false, false);
  for (DType wt : {DType::kF32, DType::kBF16, DType::kF16}) run_case(1, 136, 64, wt, false, false);
  for (int64_t m : {1, 9, 33, 66}) run_case(m, 256, 64, DType::kF32, true, false);  // 66: W8A8 and a 2-row tail
  run_case(1, 67, 13, act(), false, false);
  run_case(2, 5, 7, act(), false, false);
  run_case(1, 2048, 64, act(), false, true);
}


// A projection into the residual stream and the next block's input norm over it: norm.x is mm.y
// (what a backend may fuse: CUDA normalizes in the split GEMM's epilogue), accumulate (the
// model's residual add) and not, bias, row gaps, dims the bf16 norm takes (multiples of 8, one to
// four vectors a thread) and odd ones, every dense float weight dtype; "separate": norm.x is
// another buffer (the sequence as written). mm.y and norm.y must both match ref::matmul then
// ref::rms_norm. The quantized weights the CUDA split epilogue runs on are checked against the
// sequence bit for bit in cuda_fused_test (CudaFused.SplitEpiloguesEqualReduceThenOp).
void OpCases::matmul_rms_norm() {
  int variant = 0;
  auto run_case = [&](int64_t m, int64_t dim, int64_t k, DType wt, bool separate) {
    const bool has_bias = variant % 3 == 1, accumulate = variant % 4 != 2;
    const int64_t gap = variant % 2 ? 8 : 0;
    ++variant;
    const std::string what = "matmul_rms_norm m=" + std::to_string(m) + " dim=" + std::to_string(dim) + " k=" +
                             std::to_string(k) + " w=" + tag(wt) + (has_bias ? " bias" : "") +
                             (accumulate ? " accumulate" : "") + (separate ? " separate" : "") + " gap=" + std::to_string(gap);
    HostMat x(act(), m, k, k + gap), w(wt, dim, k, k), bias(act(), 1, dim, dim), y0(act(), m, dim, dim + gap);
    HostMat other(act(), m, dim, dim), nw(act(), 1, dim, dim), yn0(act(), m, dim, dim + gap);
    x.fill_random(rng_, 1.0f);
    w.fill_random(rng_, 0.5f);
    bias.fill_random(rng_, 1.0f);
    y0.fill_random(rng_, 2.0f);
    other.fill_random(rng_, 1.0f);
    nw.fill_random(rng_, 1.5f);
    yn0.fill_random(rng_, 1.0f);
    auto dx = upload(x), dw = upload(w), db = upload(bias), dy = upload(y0), dother = upload(other), dnw = upload(nw),
         dyn = upload(yn0);
    const ops::MatmulRmsNormParams p{
        .mm = {.x = dx->ptr(), .x_dtype = act(), .ld_x = x.ld, .w = ops::dense_weight(dw->ptr(), wt),
               .bias = has_bias ? db->ptr() : nullptr, .bias_dtype = act(), .y = dy->ptr(), .y_dtype = act(),
               .ld_y = y0.ld, .m = m, .n = dim, .k = k, .accumulate = accumulate},
        .norm = {.x = separate ? dother->ptr() : dy->ptr(), .residual = nullptr, .y = dyn->ptr(), .weight = dnw->ptr(),
                 .act_dtype = act(), .weight_dtype = act(), .rows = m, .dim = dim,
                 .ld_x = separate ? other.ld : y0.ld, .ld_res = dim, .ld_y = yn0.ld, .eps = 1e-6f}};
    if (!ran(backend()->matmul_rms_norm(p), ops::OpKind::kMatmulRmsNorm, "w=" + tag(wt), what)) return;
    HostMat got_y = download(*dy, y0), got_yn = download(*dyn, yn0), want_y = y0, want_yn = yn0;
    ops::MatmulRmsNormParams r = p;
    r.mm.x = x.data(), r.mm.w = ops::dense_weight(w.data(), wt), r.mm.bias = has_bias ? bias.data() : nullptr;
    r.mm.y = want_y.data();
    r.norm.x = separate ? other.data() : want_y.data(), r.norm.y = want_yn.data(), r.norm.weight = nw.data();
    ops::ref::matmul_rms_norm(r);
    EXPECT_TRUE(compare_mats(got_y, want_y, y0, act_tol(), what + " (mm.y)"));
    EXPECT_TRUE(compare_mats(got_yn, want_yn, yn0, act_tol(), what + " (norm.y)"));
    for (auto* b : {dx.get(), dw.get(), db.get(), dy.get(), dother.get(), dnw.get(), dyn.get()})
      EXPECT_TRUE(b->check_guards(what));
  };
  for (int64_t m : {1, 3, 9, 33})
    for (int64_t dim : {64, 136, 2048})
      for (int64_t k : {64, 200}) run_case(m, dim, k, act(), false);
  for (DType wt : {DType::kF32, DType::kBF16, DType::kF16}) run_case(3, 136, 72, wt, false);
  run_case(2, 67, 13, act(), false);      // odd dim: the generic norm kernel
  run_case(1, 16384, 64, act(), false);   // four 8-wide vectors a thread
  run_case(4, 256, 64, act(), true);
}


// The fused qkv projection, then RoPE and the cache write over its [q | k | v] rows (what a backend
// may fuse: CUDA runs RoPE and the write in the split GEMM's epilogue): GQA shapes, rotary dims
// full and partial, 1..9 tokens with a padding token (slot -1), bias, row gaps, bf16 and f32
// caches, every dense float weight dtype. The q rows of mm.y (rotated) and both caches must match
// ref::matmul then ref::rope_kv_write; mm.y's k and v rows are scratch (not compared), its gap
// columns untouched. The quantized weights the CUDA epilogue runs on are checked against the
// sequence bit for bit in cuda_fused_test (CudaFused.SplitEpiloguesEqualReduceThenOp).
void OpCases::matmul_rope_kv_write() {
  int variant = 0;
  auto run_case = [&](int32_t head_dim, int32_t rot, int64_t n_tokens, int64_t k, DType wt, DType cache_t) {
    const int32_t n_head = 4 + variant % 2 * 2, n_head_kv = 2, block_size = 5, n_blocks = 6;
    const bool has_bias = variant % 3 != 1;
    const int64_t q_dim = int64_t{n_head} * head_dim, kv_dim = int64_t{n_head_kv} * head_dim;
    const int64_t width = q_dim + 2 * kv_dim, gap = variant++ % 2 ? 6 : 0;
    const std::string what = "matmul_rope_kv_write head_dim=" + std::to_string(head_dim) + " rotary_dim=" +
                             std::to_string(rot) + " n_head=" + std::to_string(n_head) + " n_tokens=" +
                             std::to_string(n_tokens) + " k=" + std::to_string(k) + " w=" + tag(wt) + " cache=" +
                             tag(cache_t) + (has_bias ? " bias" : "") + " gap=" + std::to_string(gap);
    HostMat x(act(), n_tokens, k, k + gap), w(wt, width, k, k), bias(act(), 1, width, width);
    HostMat y0(act(), n_tokens, width, width + gap);
    x.fill_random(rng_, 1.0f);
    w.fill_random(rng_, 0.5f);
    bias.fill_random(rng_, 1.0f);
    y0.fill_random(rng_, 1.0f);
    const int64_t n_slots = int64_t{n_blocks} * block_size;
    HostMat kc(cache_t, n_slots, kv_dim, kv_dim), vc(cache_t, n_slots, kv_dim, kv_dim);
    kc.fill_random(rng_, 1.0f);
    vc.fill_random(rng_, 1.0f);
    std::vector<int32_t> slots, pos;
    random_slots_and_positions(rng_, n_slots, n_tokens, &slots, &pos);
    const std::vector<float> inv_freq = rope_inv_freq(rot);
    auto dx = upload(x), dw = upload(w), db = upload(bias), dy = upload(y0), dkc = upload(kc), dvc = upload(vc),
         dslots = upload(slots), dpos = upload(pos), dfreq = upload(inv_freq);
    auto at = [&](void* base, int64_t col) { return static_cast<uint8_t*>(base) + dtype_bytes(act(), col); };
    ops::MatmulRopeKvWriteParams p{
        .mm = {.x = dx->ptr(), .x_dtype = act(), .ld_x = x.ld, .w = ops::dense_weight(dw->ptr(), wt),
               .bias = has_bias ? db->ptr() : nullptr, .bias_dtype = act(), .y = dy->ptr(), .y_dtype = act(),
               .ld_y = y0.ld, .m = n_tokens, .n = width, .k = k, .accumulate = false},
        .rkv = {.rope = {.q = dy->ptr(), .k = at(dy->ptr(), q_dim), .act_dtype = act(),
                         .positions = static_cast<const int32_t*>(dpos->ptr()),
                         .inv_freq = static_cast<const float*>(dfreq->ptr()), .n_tokens = n_tokens, .ld_q = y0.ld,
                         .ld_k = y0.ld, .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = head_dim,
                         .rotary_dim = rot, .attention_factor = 1.0f},
                .kv = {.cache = {.k_cache = dkc->ptr(), .v_cache = dvc->ptr(), .cache_dtype = cache_t,
                                 .n_blocks = n_blocks, .block_size = block_size, .n_head_kv = n_head_kv,
                                 .head_dim = head_dim},
                       .k = at(dy->ptr(), q_dim), .v = at(dy->ptr(), q_dim + kv_dim), .act_dtype = act(),
                       .ld_k = y0.ld, .ld_v = y0.ld, .slot_mapping = static_cast<const int32_t*>(dslots->ptr()),
                       .n_tokens = n_tokens}}};
    if (!ran(backend()->matmul_rope_kv_write(p), ops::OpKind::kMatmulRopeKvWrite, "w=" + tag(wt), what)) return;
    HostMat got_y = download(*dy, y0), got_kc = download(*dkc, kc), got_vc = download(*dvc, vc);
    HostMat want_y = y0, want_kc = kc, want_vc = vc;
    ops::MatmulRopeKvWriteParams r = p;
    r.mm.x = x.data(), r.mm.w = ops::dense_weight(w.data(), wt), r.mm.bias = has_bias ? bias.data() : nullptr;
    r.mm.y = want_y.data();
    r.rkv.rope.q = want_y.data(), r.rkv.rope.k = at(want_y.data(), q_dim);
    r.rkv.rope.positions = pos.data(), r.rkv.rope.inv_freq = inv_freq.data();
    r.rkv.kv.cache.k_cache = want_kc.data(), r.rkv.kv.cache.v_cache = want_vc.data();
    r.rkv.kv.k = at(want_y.data(), q_dim), r.rkv.kv.v = at(want_y.data(), q_dim + kv_dim);
    r.rkv.kv.slot_mapping = slots.data();
    ops::ref::matmul_rope_kv_write(r);
    HostMat got_q(act(), n_tokens, q_dim, q_dim), want_q = got_q;
    for (int64_t i = 0; i < n_tokens; ++i) {
      for (int64_t j = 0; j < q_dim; ++j) {
        got_q.set(i, j, got_y.get(i, j));
        want_q.set(i, j, want_y.get(i, j));
      }
      for (int64_t j = width; j < y0.ld; ++j) {  // the gaps hold a sentinel (NaN equals NaN here)
        const float g = got_y.get(i, j), o = y0.get(i, j);
        EXPECT_TRUE(g == o || (std::isnan(g) && std::isnan(o))) << what << ": y's gap written at [" << i << ", " << j << "]";
      }
    }
    EXPECT_TRUE(compare_mats(got_q, want_q, want_q, act_tol(), what + " (q rows)"));
    // A bf16 cache rounds what the matmul gave: a value next to a rounding boundary may land one
    // bf16 step (2^-8 relative) from the reference's.
    const double cache_tol = cache_t == DType::kBF16 ? std::max(act_tol(), 1.0 / 128) : act_tol();
    EXPECT_TRUE(compare_mats(got_kc, want_kc, kc, cache_tol, what + " (k cache)"));
    EXPECT_TRUE(compare_mats(got_vc, want_vc, vc, cache_tol, what + " (v cache)"));
    for (auto* b : {dx.get(), dw.get(), db.get(), dy.get(), dkc.get(), dvc.get(), dslots.get(), dpos.get(), dfreq.get()})
      EXPECT_TRUE(b->check_guards(what));
  };
  for (DType cache_t : {DType::kBF16, DType::kF32})
    for (int64_t n_tokens : {1, 5, 9})
      for (auto [hd, rot] : {std::pair<int32_t, int32_t>{128, 128}, {64, 32}}) run_case(hd, rot, n_tokens, 72, act(), cache_t);
  for (DType wt : {DType::kF32, DType::kBF16, DType::kF16}) run_case(64, 64, 3, 40, wt, DType::kBF16);
}

}  // namespace frugal::testing

namespace frugal::testing {

// MLA's whole attention part (DeepSeek with q_lora_rank 0, absorbed): the input norm and the fused
// q / kv_a projection, the latent prologue, W_abs, attention over the paged latent cache, W_UV and
// the o projection into the residual stream. V2-Lite's widths (hidden 2048, 16 heads, c 512, rope
// 64, nope 128, v 128) and an odd small one (hidden 72, 3 heads, c 24, rope 8, nope 16, v 8);
// one decode at contexts 1, 37, 300 and 1030 (CUDA: one persistent kernel), three decodes and a
// prefill chunk (the sequence); bf16 and f32 caches, block sizes 16 and 5, scattered block
// tables. Random W_abs (the op is a generic batched matmul; the model's holds W_UK^T and an
// identity), W_UV rows inside a kv_b-like layout, weights scaled by 1 / sqrt(k) so scores stay a
// few units. Checked: the residual stream and the cache (this step's rows against the reference's,
// every other slot unchanged), to act_tol, or to a bf16 step where a bf16 cache sits under f32
// activations.
void OpCases::mla_attention() {
  struct Dims {
    int64_t hidden;
    int32_t n_head, rank, rope, nope, vdim;
  };
  struct Batch {
    std::vector<std::pair<int32_t, int32_t>> seqs;  // (new tokens, context after the step)
    int32_t n_decode;
  };
  const std::vector<Batch> batches = {
      {{{1, 1}}, 1}, {{{1, 37}}, 1}, {{{1, 300}}, 1}, {{{1, 1030}}, 1}, {{{1, 37}, {1, 300}, {1, 1}}, 3}, {{{5, 9}}, 0}};
  int variant = 0;
  for (Dims d : {Dims{2048, 16, 512, 64, 128, 128}, Dims{72, 3, 24, 8, 16, 8}}) {
    const int32_t H = d.n_head, lat = d.rank + d.rope, qk = d.nope + d.rope;
    const int64_t qout = int64_t{H} * qk, q_ld = qout + lat, cat_ld = int64_t{H} * lat, v_w = int64_t{H} * d.vdim;
    // The weights, once a shape (the op only reads them).
    HostMat wn(act(), 1, d.hidden, d.hidden), wkvn(act(), 1, d.rank, d.rank);
    wn.fill_random(rng_, 1.5f);
    wkvn.fill_random(rng_, 1.5f);
    HostMat wq(act(), q_ld, d.hidden, d.hidden), wabs(act(), H, int64_t{lat} * qk, int64_t{lat} * qk);
    HostMat kvb(act(), int64_t{H} * (d.nope + d.vdim), d.rank, d.rank), wo(act(), d.hidden, v_w, v_w);
    wq.fill_random(rng_, 1.7f / std::sqrt(static_cast<float>(d.hidden)));
    wabs.fill_random(rng_, 1.7f / std::sqrt(static_cast<float>(qk)));
    kvb.fill_random(rng_, 1.7f / std::sqrt(static_cast<float>(d.rank)));
    wo.fill_random(rng_, 1.7f / std::sqrt(static_cast<float>(v_w)));
    const std::vector<float> inv_freq = rope_inv_freq(d.rope);
    auto dwn = upload(wn), dwkvn = upload(wkvn), dwq = upload(wq), dwabs = upload(wabs), dkvb = upload(kvb),
         dwo = upload(wo), dfreq = upload(inv_freq);
    for (DType cache_t : {DType::kBF16, DType::kF32})
      for (const Batch& b : batches) {
        const int32_t block_size = variant % 2 ? 5 : 16;
        const bool interleaved = variant % 3 == 1;
        ++variant;
        std::string what = "mla_attention hidden=" + std::to_string(d.hidden) + " heads=" + std::to_string(H) +
                           " rank=" + std::to_string(d.rank) + " cache=" + tag(cache_t) + " block=" +
                           std::to_string(block_size) + " seqs=";
        for (auto [nq, ctx] : b.seqs) what += "(" + std::to_string(nq) + "/" + std::to_string(ctx) + ")";
        // Block tables over a shuffled pool; this step's tokens get the slots of their positions.
        const int32_t n_seqs = static_cast<int32_t>(b.seqs.size());
        int32_t max_blocks = 0, needed = 0, n_tokens = 0;
        for (auto [nq, ctx] : b.seqs) {
          max_blocks = std::max(max_blocks, (ctx + block_size - 1) / block_size);
          needed += (ctx + block_size - 1) / block_size;
          n_tokens += nq;
        }
        const int32_t n_blocks = needed + 2;
        std::vector<int32_t> pool(static_cast<size_t>(n_blocks));
        std::iota(pool.begin(), pool.end(), 0);
        std::shuffle(pool.begin(), pool.end(), rng_);
        std::vector<int32_t> tables(static_cast<size_t>(n_seqs) * max_blocks, -1), q_start{0}, ctx_len, slots, pos;
        size_t next = 0;
        for (int32_t s = 0; s < n_seqs; ++s) {
          const auto [nq, ctx] = b.seqs[static_cast<size_t>(s)];
          for (int32_t j = 0; j < ctx; j += block_size) tables[static_cast<size_t>(s * max_blocks + j / block_size)] = pool[next++];
          for (int32_t j = ctx - nq; j < ctx; ++j) {
            slots.push_back(tables[static_cast<size_t>(s * max_blocks + j / block_size)] * block_size + j % block_size);
            pos.push_back(j);
          }
          q_start.push_back(q_start.back() + nq);
          ctx_len.push_back(ctx);
        }
        const int64_t n_slots = int64_t{n_blocks} * block_size;
        HostMat cache(cache_t, n_slots, lat, lat);
        cache.fill_random(rng_, 1.0f);
        HostMat resid(act(), n_tokens, d.hidden, d.hidden);
        resid.fill_random(rng_, 1.0f);
        // Scratch, filled with noise: the op may leave it as it likes.
        HostMat xn(act(), n_tokens, d.hidden, d.hidden), qbuf(act(), n_tokens, q_ld, q_ld);
        HostMat qcat(act(), n_tokens, cat_ld, cat_ld), ocat = qcat, attn(act(), n_tokens, v_w, v_w);
        for (HostMat* m : {&xn, &qbuf, &qcat, &ocat, &attn}) m->fill_random(rng_, 1.0f);
        auto dres = upload(resid), dxn = upload(xn), dq = upload(qbuf), dqcat = upload(qcat), docat = upload(ocat),
             dattn = upload(attn), dcache = upload(cache), dtab = upload(tables), dqs = upload(q_start),
             dctx = upload(ctx_len), dslots = upload(slots), dpos = upload(pos);
        auto at = [&](const void* base, int64_t el) { return static_cast<uint8_t*>(const_cast<void*>(base)) + dtype_bytes(act(), el); };
        // The Params over a set of buffers (device, or the host copies for the reference).
        struct Bufs {
          void *resid, *wn, *wkvn, *wq, *wabs, *kvb, *wo, *xn, *q, *qcat, *ocat, *attn, *cache;
          const int32_t *tables, *q_start, *ctx_len, *slots, *pos;
          const float* inv_freq;
        };
        auto params = [&](const Bufs& u) {
          void* kva = at(u.q, qout);
          const ops::RmsNormParams norm{.x = u.resid, .residual = nullptr, .y = u.xn, .weight = u.wn, .act_dtype = act(),
                                        .weight_dtype = act(), .rows = n_tokens, .dim = d.hidden, .ld_x = d.hidden,
                                        .ld_res = d.hidden, .ld_y = d.hidden, .eps = 1e-6f};
          const ops::KvCacheLayer kc{.k_cache = u.cache, .v_cache = u.cache, .cache_dtype = cache_t, .n_blocks = n_blocks,
                                     .block_size = block_size, .n_head_kv = 1, .head_dim = lat};
          return ops::MlaAttentionParams{
              .qkv = {.norm = norm,
                      .mm = {.x = u.xn, .x_dtype = act(), .ld_x = d.hidden, .w = ops::dense_weight(u.wq, act()),
                             .bias = nullptr, .bias_dtype = act(), .y = u.q, .y_dtype = act(), .ld_y = q_ld, .m = n_tokens,
                             .n = q_ld, .k = d.hidden, .accumulate = false}},
              .prologue = {.norm = {.x = kva, .residual = nullptr, .y = kva, .weight = u.wkvn, .act_dtype = act(),
                                    .weight_dtype = act(), .rows = n_tokens, .dim = d.rank, .ld_x = q_ld, .ld_res = q_ld,
                                    .ld_y = q_ld, .eps = 1e-6f},
                           .rope = {.q = at(u.q, d.nope), .k = at(kva, d.rank), .act_dtype = act(), .positions = u.pos,
                                    .inv_freq = u.inv_freq, .n_tokens = n_tokens, .ld_q = q_ld, .ld_k = q_ld,
                                    .n_head = H, .n_head_kv = 1, .head_dim = qk, .rotary_dim = d.rope,
                                    .attention_factor = 1.0f, .interleaved = interleaved},
                           .kv = {.cache = kc, .k = kva, .v = kva, .act_dtype = act(), .ld_k = q_ld, .ld_v = q_ld,
                                  .slot_mapping = u.slots, .n_tokens = n_tokens}},
              .absorb = {.x = u.q, .x_dtype = act(), .ld_x = q_ld, .stride_x = qk, .w = u.wabs, .w_dtype = act(),
                         .stride_w = int64_t{lat} * qk, .y = u.qcat, .y_dtype = act(), .ld_y = cat_ld, .stride_y = lat,
                         .batch = H, .m = n_tokens, .n = lat, .k = qk},
              .attn = {.attn = {.cache = kc, .q = u.qcat, .out = u.ocat, .act_dtype = act(), .ld_q = cat_ld,
                                .ld_out = cat_ld, .n_seqs = n_seqs, .n_tokens = n_tokens, .q_start = u.q_start,
                                .ctx_len = u.ctx_len, .block_tables = u.tables, .max_blocks_per_seq = max_blocks,
                                .max_ctx_len = *std::max_element(ctx_len.begin(), ctx_len.end()), .n_head = H,
                                .sliding_window = 0, .scale = 1.0f / std::sqrt(static_cast<float>(qk)),
                                .n_decode_seqs = b.n_decode,
                                .decode_max_ctx_len = b.n_decode > 0 ? *std::max_element(ctx_len.begin(), ctx_len.begin() + b.n_decode) : 0},
                       .mm = {.x = u.ocat, .x_dtype = act(), .ld_x = cat_ld, .stride_x = lat,
                              .w = at(u.kvb, int64_t{d.nope} * d.rank), .w_dtype = act(),
                              .stride_w = int64_t{d.nope + d.vdim} * d.rank, .y = u.attn, .y_dtype = act(), .ld_y = v_w,
                              .stride_y = d.vdim, .batch = H, .m = n_tokens, .n = d.vdim, .k = d.rank}},
              .o = {.x = u.attn, .x_dtype = act(), .ld_x = v_w, .w = ops::dense_weight(u.wo, act()), .bias = nullptr,
                    .bias_dtype = act(), .y = u.resid, .y_dtype = act(), .ld_y = d.hidden, .m = n_tokens, .n = d.hidden,
                    .k = v_w, .accumulate = true}};
        };
        const ops::MlaAttentionParams p = params(Bufs{
            dres->ptr(), dwn->ptr(), dwkvn->ptr(), dwq->ptr(), dwabs->ptr(), dkvb->ptr(), dwo->ptr(), dxn->ptr(),
            dq->ptr(), dqcat->ptr(), docat->ptr(), dattn->ptr(), dcache->ptr(), static_cast<const int32_t*>(dtab->ptr()),
            static_cast<const int32_t*>(dqs->ptr()), static_cast<const int32_t*>(dctx->ptr()),
            static_cast<const int32_t*>(dslots->ptr()), static_cast<const int32_t*>(dpos->ptr()),
            static_cast<const float*>(dfreq->ptr())});
        if (!ran(backend()->mla_attention(p), ops::OpKind::kMlaAttention, "cache=" + tag(cache_t), what)) continue;
        HostMat got_res = download(*dres, resid), got_cache = download(*dcache, cache);
        HostMat want_res = resid, want_cache = cache, hxn = xn, hq = qbuf, hqcat = qcat, hocat = ocat, hattn = attn;
        ops::ref::mla_attention(params(Bufs{want_res.data(), wn.data(), wkvn.data(), wq.data(), wabs.data(), kvb.data(),
                                            wo.data(), hxn.data(), hq.data(), hqcat.data(), hocat.data(), hattn.data(),
                                            want_cache.data(), tables.data(), q_start.data(), ctx_len.data(), slots.data(),
                                            pos.data(), inv_freq.data()}));
        // A bf16 cache under f32 activations: the token's row is rounded to bf16 from a kv_a row the
        // backend's matmul summed in its own order, so an element may round one bf16 step apart
        // (2^-8 relative) from the reference's, and attention reads that row back.
        const bool coarse = cache_t == DType::kBF16 && act() == DType::kF32;
        EXPECT_TRUE(compare_mats(got_res, want_res, resid, coarse ? 2e-3 : act_tol(), what + " (residual stream)"));
        EXPECT_TRUE(compare_mats(got_cache, want_cache, cache, coarse ? 1e-2 : act_tol(), what + " (cache)"));
        for (auto* g : {dres.get(), dwn.get(), dwkvn.get(), dwq.get(), dwabs.get(), dkvb.get(), dwo.get(), dxn.get(),
                        dq.get(), dqcat.get(), docat.get(), dattn.get(), dcache.get(), dtab.get(), dqs.get(), dctx.get(),
                        dslots.get(), dpos.get(), dfreq.get()})
          EXPECT_TRUE(g->check_guards(what));
      }
  }
}

}  // namespace frugal::testing
