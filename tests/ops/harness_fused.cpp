// The op harness cases of the fused ops (ops/op_list.h FRUGAL_FUSED_OPS): each is its sequence of
// ops, so ops::ref runs that sequence on the same host inputs. The cases use the model's data
// flow (what a backend may fuse) on odd shapes, and one other layout that must run as the plain
// sequence.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "harness.h"
#include "ops/reference.h"

namespace frugal::testing {
namespace {

std::string tag(DType t) { return dtype_name(t); }

std::vector<float> rope_inv_freq(int32_t rotary_dim) {
  std::vector<float> f(static_cast<size_t>(rotary_dim / 2));
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / rotary_dim));
  return f;
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
  std::uniform_int_distribution<int32_t> pos_dist(0, 40000);
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
          std::vector<int32_t> slots(static_cast<size_t>(n_slots)), pos(static_cast<size_t>(n_tokens));
          std::iota(slots.begin(), slots.end(), 0);
          std::shuffle(slots.begin(), slots.end(), rng_);
          slots.resize(static_cast<size_t>(n_tokens));
          if (n_tokens > 1) slots[1] = -1;  // a padding token: rotated, not written
          for (auto& v : pos) v = pos_dist(rng_);
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

}  // namespace frugal::testing
