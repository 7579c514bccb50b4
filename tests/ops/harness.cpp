// The op harness cases: each OpCases::<op>() runs many cases of one op on the backend under test
// and on ops::ref with the same (dtype-rounded) host inputs. A refusal (Status kUnsupported)
// passes only where the backend's SupportTable lists it; any other error fails. The TEST_Ps are
// generated from ops/op_list.h at the end of this file.
#include "harness.h"

#include <algorithm>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/reference.h"
#include "ops/weight_format_check.h"

namespace frugal::testing {

int g_op_harness_anchor = 0;

namespace {

const DType kFloatTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

std::string tag(DType t) { return dtype_name(t); }

}  // namespace

void OpCases::matmul() {
  const int64_t ms[] = {1, 3, 7, 8, 9, 33};
  const int64_t ks[] = {5, 64, 67, 129};
  const int64_t ns[] = {1, 13, 130};
  int variant = 0;
  auto run_case = [&](int64_t m, int64_t n, int64_t k, DType wt) {
    const bool has_bias = variant % 3 == 1, accumulate = variant % 4 >= 2;
    const int64_t x_gap = variant % 2 ? 3 : 0, y_gap = variant % 5 < 2 ? 5 : 0;
    ++variant;
    const std::string what = "matmul m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                             " w=" + tag(wt) + (has_bias ? " bias" : "") + (accumulate ? " accumulate" : "") +
                             " ld_x=" + std::to_string(k + x_gap) + " ld_y=" + std::to_string(n + y_gap);
    HostMat x(act(), m, k, k + x_gap), w(wt, n, k, k), bias(wt, 1, n, n), y0(act(), m, n, n + y_gap);
    x.fill_random(rng_, 1.0f);
    w.fill_random(rng_, 1.0f);
    bias.fill_random(rng_, 1.0f);
    y0.fill_random(rng_, 1.0f);
    auto dx = upload(x), dw = upload(w), db = upload(bias), dy = upload(y0);
    ops::MatmulParams p{.x = dx->ptr(), .x_dtype = act(), .ld_x = k + x_gap, .w = ops::dense_weight(dw->ptr(), wt),
                        .bias = has_bias ? db->ptr() : nullptr, .bias_dtype = wt, .y = dy->ptr(),
                        .y_dtype = act(), .ld_y = n + y_gap, .m = m, .n = n, .k = k, .accumulate = accumulate};
    if (!ran(backend()->matmul(p), ops::OpKind::kMatmul, "w=" + ops::weight_format_name(p.w.format), what)) return;
    HostMat got = download(*dy, y0), want = y0;
    p.x = x.data(), p.w.data = w.data(), p.bias = has_bias ? bias.data() : nullptr, p.y = want.data();
    ops::ref::matmul(p);
    EXPECT_TRUE(compare_mats(got, want, y0, act_tol(), what));
    for (auto* b : {dx.get(), dw.get(), db.get(), dy.get()}) EXPECT_TRUE(b->check_guards(what));
  };
  for (DType wt : kFloatTypes)
    for (int64_t m : ms)
      for (int64_t k : ks)
        for (int64_t n : ns) run_case(m, n, k, wt);
  // Several packed blocks in n and k with tails, and a prefill-sized m.
  for (DType wt : kFloatTypes) {
    run_case(40, 300, 600, wt);
    run_case(64, 257, 520, wt);
    run_case(2, 1000, 300, wt);
  }
  matmul_quant();
}

void OpCases::rms_norm() {
  int variant = 0;
  for (DType wt : kFloatTypes)
    for (int64_t rows : {1, 3, 17})
      for (int64_t dim : {5, 64, 67, 1536})
        for (bool with_res : {false, true}) {
          const int64_t gap = variant++ % 3 == 0 ? 0 : 7;
          const std::string what = "rms_norm rows=" + std::to_string(rows) + " dim=" + std::to_string(dim) + " w=" +
                                   tag(wt) + (with_res ? " residual" : "") + " gap=" + std::to_string(gap);
          HostMat x(act(), rows, dim, dim + gap), res(act(), rows, dim, dim + 2 * gap), y0(act(), rows, dim, dim + gap),
              w(wt, 1, dim, dim);
          x.fill_random(rng_, 2.0f);
          res.fill_random(rng_, 2.0f);
          y0.fill_random(rng_, 1.0f);
          w.fill_random(rng_, 1.5f);
          auto dx = upload(x), dres = upload(res), dy = upload(y0), dw = upload(w);
          ops::RmsNormParams p{.x = dx->ptr(), .residual = with_res ? dres->ptr() : nullptr, .y = dy->ptr(),
                               .weight = dw->ptr(), .act_dtype = act(), .weight_dtype = wt, .rows = rows, .dim = dim,
                               .ld_x = dim + gap, .ld_res = dim + 2 * gap, .ld_y = dim + gap, .eps = 1e-6f};
          if (!ran(backend()->rms_norm(p), ops::OpKind::kRmsNorm, "w=" + tag(wt), what)) continue;
          HostMat got_y = download(*dy, y0), got_res = download(*dres, res), want_y = y0, want_res = res;
          p.x = x.data(), p.residual = with_res ? want_res.data() : nullptr, p.y = want_y.data(), p.weight = w.data();
          ops::ref::rms_norm(p);
          EXPECT_TRUE(compare_mats(got_y, want_y, y0, act_tol(), what + " (y)"));
          EXPECT_TRUE(compare_mats(got_res, want_res, res, act_tol(), what + " (residual)"));
          for (auto* b : {dx.get(), dres.get(), dy.get(), dw.get()}) EXPECT_TRUE(b->check_guards(what));
        }
}

void OpCases::rope() {
  int variant = 0;
  std::uniform_int_distribution<int32_t> pos_dist(0, 40000);
  for (int32_t head_dim : {64, 128, 10})
    for (int32_t n_tokens : {1, 5, 9})
      for (bool partial : {false, true})
        for (bool with_k : {true, false}) {
          const int32_t n_head = 3, n_head_kv = variant % 2 ? 2 : 1;
          const int32_t rotary_dim = partial ? (head_dim / 2) / 2 * 2 : head_dim;
          const float factor = variant % 3 == 2 ? 1.25f : 1.0f;
          const bool interleaved = variant % 4 == 3;
          const int64_t gap = variant++ % 2 ? 6 : 0;
          const std::string what = "rope head_dim=" + std::to_string(head_dim) + " rotary_dim=" +
                                   std::to_string(rotary_dim) + " n_tokens=" + std::to_string(n_tokens) +
                                   (with_k ? " q+k" : " q only") + " gap=" + std::to_string(gap) +
                                   (interleaved ? " interleaved" : "");
          HostMat q(act(), n_tokens, int64_t{n_head} * head_dim, int64_t{n_head} * head_dim + gap),
              k(act(), n_tokens, int64_t{n_head_kv} * head_dim, int64_t{n_head_kv} * head_dim + gap);
          q.fill_random(rng_, 1.0f);
          k.fill_random(rng_, 1.0f);
          std::vector<int32_t> pos(static_cast<size_t>(n_tokens));
          for (auto& v : pos) v = pos_dist(rng_);
          pos[0] = 0;
          std::vector<float> inv_freq(static_cast<size_t>(rotary_dim / 2));
          for (size_t i = 0; i < inv_freq.size(); ++i)
            inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / rotary_dim));
          auto dq = upload(q), dk = upload(k), dpos = upload(pos), dfreq = upload(inv_freq);
          ops::RopeParams p{.q = dq->ptr(), .k = with_k ? dk->ptr() : nullptr, .act_dtype = act(),
                            .positions = static_cast<const int32_t*>(dpos->ptr()),
                            .inv_freq = static_cast<const float*>(dfreq->ptr()), .n_tokens = n_tokens,
                            .ld_q = q.ld, .ld_k = k.ld, .n_head = n_head, .n_head_kv = n_head_kv,
                            .head_dim = head_dim, .rotary_dim = rotary_dim, .attention_factor = factor,
                            .interleaved = interleaved};
          if (!ran(backend()->rope(p), ops::OpKind::kRope, "", what)) continue;
          HostMat got_q = download(*dq, q), got_k = download(*dk, k), want_q = q, want_k = k;
          p.q = want_q.data(), p.k = with_k ? want_k.data() : nullptr, p.positions = pos.data();
          p.inv_freq = inv_freq.data();
          ops::ref::rope(p);
          EXPECT_TRUE(compare_mats(got_q, want_q, q, act_tol(), what + " (q)"));
          EXPECT_TRUE(compare_mats(got_k, want_k, k, act_tol(), what + " (k)"));
          for (auto* b : {dq.get(), dk.get(), dpos.get(), dfreq.get()}) EXPECT_TRUE(b->check_guards(what));
        }
}

void OpCases::kv_write() {
  for (DType cache_t : {DType::kF32, DType::kBF16, DType::kF8E4M3, DType::kI8})
    for (int32_t head_dim : {64, 12})
      for (int32_t block_size : {4, 5}) {
        const int32_t n_blocks = 6, n_head_kv = 2, n_tokens = 7;
        const int64_t row = int64_t{n_head_kv} * head_dim, gap = head_dim == 12 ? 3 : 0;
        const bool int8 = cache_t == DType::kI8, fp8 = cache_t == DType::kF8E4M3;
        const std::string what = "kv_write cache=" + tag(cache_t) + " head_dim=" + std::to_string(head_dim) +
                                 " block_size=" + std::to_string(block_size);
        HostMat k(act(), n_tokens, row, row + gap), v(act(), n_tokens, row, row + gap);
        k.fill_random(rng_, 1.0f);
        v.fill_random(rng_, 1.0f);
        if (head_dim == 12)  // an all-zero head row: int8 scale 0, reads back as zeros
          for (int e = 0; e < head_dim; ++e) k.set(0, e, 0.0f);
        if (fp8)  // past e4m3's 448 once scaled by 1/k_scale: saturates
          k.set(1, 0, 300.0f);
        const int64_t n_slots = int64_t{n_blocks} * block_size;
        HostMat kc(cache_t, n_slots, row, row), vc(cache_t, n_slots, row, row);
        kc.fill_random(rng_, int8 ? 100.0f : 1.0f);
        vc.fill_random(rng_, int8 ? 100.0f : 1.0f);
        HostMat ks(DType::kF32, n_slots, n_head_kv, n_head_kv), vs = ks;  // int8 scales
        ks.fill_random(rng_, 1.0f);
        vs.fill_random(rng_, 1.0f);
        std::vector<int32_t> slots(static_cast<size_t>(n_slots));
        std::iota(slots.begin(), slots.end(), 0);
        std::shuffle(slots.begin(), slots.end(), rng_);
        slots.resize(n_tokens);
        slots[3] = -1;  // a padding token: skipped
        auto dk = upload(k), dv = upload(v), dkc = upload(kc), dvc = upload(vc), dslots = upload(slots);
        auto dks = upload(ks), dvs = upload(vs);
        ops::KvWriteParams p{
            .cache = {.k_cache = dkc->ptr(), .v_cache = dvc->ptr(), .cache_dtype = cache_t, .n_blocks = n_blocks,
                      .block_size = block_size, .n_head_kv = n_head_kv, .head_dim = head_dim,
                      .k_scales = int8 ? static_cast<float*>(dks->ptr()) : nullptr,
                      .v_scales = int8 ? static_cast<float*>(dvs->ptr()) : nullptr,
                      .k_scale = fp8 ? 0.5f : 1.0f, .v_scale = fp8 ? 0.0625f : 1.0f},
            .k = dk->ptr(), .v = dv->ptr(), .act_dtype = act(), .ld_k = k.ld, .ld_v = v.ld,
            .slot_mapping = static_cast<const int32_t*>(dslots->ptr()), .n_tokens = n_tokens};
        if (!ran(backend()->kv_write(p), ops::OpKind::kKvWrite, "cache=" + tag(cache_t), what)) continue;
        HostMat got_k = download(*dkc, kc), got_v = download(*dvc, vc), want_k = kc, want_v = vc;
        HostMat got_ks = download(*dks, ks), got_vs = download(*dvs, vs), want_ks = ks, want_vs = vs;
        p.cache.k_cache = want_k.data(), p.cache.v_cache = want_v.data(), p.k = k.data(), p.v = v.data();
        if (int8) p.cache.k_scales = static_cast<float*>(want_ks.data()), p.cache.v_scales = static_cast<float*>(want_vs.data());
        p.slot_mapping = slots.data();
        ops::ref::kv_write(p);
        // A copy with one rounding (or one quantization by the rule of ops/kv_quant.h): must be exact.
        EXPECT_TRUE(compare_mats(got_k, want_k, kc, 0.0, what + " (k cache)"));
        EXPECT_TRUE(compare_mats(got_v, want_v, vc, 0.0, what + " (v cache)"));
        EXPECT_TRUE(compare_mats(got_ks, want_ks, ks, 0.0, what + " (k scales)"));
        EXPECT_TRUE(compare_mats(got_vs, want_vs, vs, 0.0, what + " (v scales)"));
        if (int8 || fp8) {
          // Independently of the reference: what the cache reads back is the input within half a
          // quantization step (int8: scale / 2 with scale = max|row| / 127; e4m3: 2^-4 relative,
          // 2^-10 absolute below its smallest normal, both times the layer scale; saturated at 448).
          ops::KvCacheLayer c = p.cache;
          c.k_cache = got_k.data(), c.v_cache = got_v.data();
          c.k_scales = static_cast<float*>(got_ks.data()), c.v_scales = static_cast<float*>(got_vs.data());
          for (int64_t t = 0; t < n_tokens; ++t) {
            if (slots[static_cast<size_t>(t)] < 0) continue;
            for (int which = 0; which < 2; ++which) {
              const HostMat& x = which ? v : k;
              const float ls = which ? c.v_scale : c.k_scale;
              for (int h = 0; h < n_head_kv; ++h) {
                float amax = 0;
                for (int e = 0; e < head_dim; ++e) amax = std::max(amax, std::fabs(x.get(t, h * head_dim + e)));
                for (int e = 0; e < head_dim; ++e) {
                  const float want = x.get(t, h * head_dim + e);
                  const float got = ops::ref::kv_load(c, which == 1, slots[static_cast<size_t>(t)], h, e);
                  float bound = int8 ? amax / 127.0f / 2.0f * 1.0001f
                                     : std::max(std::fabs(want) / 16.0f, ls / 1024.0f) * 1.0001f;
                  if (fp8 && std::fabs(want) / ls >= 448.0f) bound = std::fabs(want) - 448.0f * ls;
                  EXPECT_LE(std::fabs(got - want), bound)
                      << what << " token " << t << (which ? " v" : " k") << " head " << h << " elem " << e;
                }
              }
            }
          }
        }
        for (auto* b : {dk.get(), dv.get(), dkc.get(), dvc.get(), dslots.get(), dks.get(), dvs.get()})
          EXPECT_TRUE(b->check_guards(what));
      }
}

void OpCases::silu_mul() {
  int variant = 0;
  for (int64_t n_tokens : {1, 3, 9})
    for (int64_t dim : {5, 64, 67, 1000}) {
      const int64_t gap = variant++ % 2 ? 0 : 9;
      const std::string what = "silu_mul n_tokens=" + std::to_string(n_tokens) + " dim=" + std::to_string(dim);
      HostMat gate(act(), n_tokens, dim, dim + gap), up(act(), n_tokens, dim, dim + 2 * gap),
          out0(act(), n_tokens, dim, dim + gap);
      gate.fill_random(rng_, 8.0f);
      up.fill_random(rng_, 1.0f);
      out0.fill_random(rng_, 1.0f);
      // Saturated gates: silu(-100) ~ 0, silu(100) = 100.
      gate.set(0, 0, -100.0f);
      gate.set(n_tokens - 1, dim - 1, 100.0f);
      auto dg = upload(gate), du = upload(up), dout = upload(out0);
      ops::SiluMulParams p{.gate = dg->ptr(), .up = du->ptr(), .out = dout->ptr(), .act_dtype = act(),
                           .n_tokens = n_tokens, .dim = dim, .ld_gate = gate.ld, .ld_up = up.ld, .ld_out = out0.ld};
      if (!ran(backend()->silu_mul(p), ops::OpKind::kSiluMul, "", what)) continue;
      HostMat got = download(*dout, out0), want = out0;
      p.gate = gate.data(), p.up = up.data(), p.out = want.data();
      ops::ref::silu_mul(p);
      EXPECT_TRUE(compare_mats(got, want, out0, act_tol(), what));
      for (auto* b : {dg.get(), du.get(), dout.get()}) EXPECT_TRUE(b->check_guards(what));
    }
}

void OpCases::embedding() {
  for (DType table_t : kFloatTypes)
    for (int64_t dim : {5, 64, 67}) {
      const int64_t vocab = 50, n_tokens = 7;
      const std::string what = "embedding table=" + tag(table_t) + " dim=" + std::to_string(dim);
      HostMat table(table_t, vocab, dim, dim), out0(act(), n_tokens, dim, dim);
      table.fill_random(rng_, 1.0f);
      out0.fill_random(rng_, 1.0f);
      // Edge encodings in a looked-up row: f16 subnormal, negative zero, f16 max, tiny bf16.
      const float specials[] = {1e-6f, -0.0f, 65504.0f, 3e-39f, -2.5e-7f};
      for (int64_t j = 0; j < dim; ++j) table.set(7, j, specials[j % 5]);
      std::vector<int32_t> ids = {0, 49, 7, 7, 23, 1, 48};
      auto dt = upload(table), dids = upload(ids), dout = upload(out0);
      ops::EmbeddingParams p{.table = dt->ptr(), .table_dtype = table_t,
                             .ids = static_cast<const int32_t*>(dids->ptr()), .out = dout->ptr(),
                             .out_dtype = act(), .n_tokens = n_tokens, .dim = dim, .vocab = vocab};
      if (!ran(backend()->embedding(p), ops::OpKind::kEmbedding, "table=" + tag(table_t), what)) continue;
      HostMat got = download(*dout, out0), want = out0;
      p.table = table.data(), p.ids = ids.data(), p.out = want.data();
      ops::ref::embedding(p);
      EXPECT_TRUE(compare_mats(got, want, out0, act() == DType::kF32 ? 0.0 : act_tol(), what));
      for (auto* b : {dt.get(), dids.get(), dout.get()}) EXPECT_TRUE(b->check_guards(what));

      // Vocab-parallel: a shard of rows [20, 35) looks up the ids it holds and gives zero rows
      // for the others. Expected: the whole table's lookup with the other ids' rows zeroed.
      const int64_t begin = 20, count = 15;
      const std::string swhat = what + " shard [20, 35)";
      HostMat shard(table_t, count, dim, dim);
      for (int64_t r = 0; r < count; ++r)
        for (int64_t j = 0; j < dim; ++j) shard.set(r, j, table.get(begin + r, j));
      std::vector<int32_t> sids = {0, 20, 34, 35, 49, 23, 19};
      auto ds = upload(shard), dsids = upload(sids), dsout = upload(out0);
      ops::EmbeddingParams sp{.table = ds->ptr(), .table_dtype = table_t,
                              .ids = static_cast<const int32_t*>(dsids->ptr()), .out = dsout->ptr(),
                              .out_dtype = act(), .n_tokens = n_tokens, .dim = dim, .vocab = count,
                              .vocab_begin = begin, .full_vocab = vocab};
      if (!ran(backend()->embedding(sp), ops::OpKind::kEmbedding, "table=" + tag(table_t), swhat)) continue;
      HostMat sgot = download(*dsout, out0), swant = out0;
      ops::EmbeddingParams whole = p;
      whole.table = table.data(), whole.ids = sids.data(), whole.out = swant.data();
      ops::ref::embedding(whole);
      for (int64_t t = 0; t < n_tokens; ++t)
        if (sids[t] < begin || sids[t] >= begin + count)
          for (int64_t j = 0; j < dim; ++j) swant.set(t, j, 0.0f);
      EXPECT_TRUE(compare_mats(sgot, swant, out0, act() == DType::kF32 ? 0.0 : act_tol(), swhat));
      for (auto* b : {ds.get(), dsids.get(), dsout.get()}) EXPECT_TRUE(b->check_guards(swhat));
    }
}

void OpCases::gather_rows() {
  for (int64_t dim : {5, 64, 67}) {
    const int64_t n_src = 20;
    const std::string what = "gather_rows dim=" + std::to_string(dim);
    HostMat x(act(), n_src, dim, dim + 3), out0(act(), 4, dim, dim + 1);
    x.fill_random(rng_, 1.0f);
    out0.fill_random(rng_, 1.0f);
    std::vector<int32_t> rows = {3, 0, 19, 3};
    auto dx = upload(x), drows = upload(rows), dout = upload(out0);
    ops::GatherRowsParams p{.x = dx->ptr(), .x_dtype = act(), .ld_x = x.ld,
                            .rows = static_cast<const int32_t*>(drows->ptr()), .out = dout->ptr(),
                            .out_dtype = act(), .ld_out = out0.ld, .n_rows = 4, .dim = dim};
    if (!ran(backend()->gather_rows(p), ops::OpKind::kGatherRows, "", what)) continue;
    HostMat got = download(*dout, out0), want = out0;
    p.x = x.data(), p.rows = rows.data(), p.out = want.data();
    ops::ref::gather_rows(p);
    EXPECT_TRUE(compare_mats(got, want, out0, 0.0, what));
    for (auto* b : {dx.get(), drows.get(), dout.get()}) EXPECT_TRUE(b->check_guards(what));
  }
}

// Routing on f32 logits of every method; expert choices must match the reference exactly
// (logits are spread so no two choices are within float rounding), weights to 1e-5. The tie
// cases give four experts each logit, exactly: equal logits make equal scores on either side,
// and the lower expert id must win (the reference's rule), in the expert and group choices alike
// (CUDA: the one-pass rank selection up to 64 values, the arg-max rounds past it).
void OpCases::moe_route() {
  struct Case { ops::MoeScoring scoring; ops::MoeTopk method; int32_t n_experts, top_k, n_group, topk_group; bool bias, norm; float scale; bool ties = false; };
  const Case cases[] = {
      {ops::MoeScoring::kSoftmax, ops::MoeTopk::kGreedy, 8, 2, 1, 1, false, false, 1.0f},
      {ops::MoeScoring::kSoftmax, ops::MoeTopk::kGreedy, 64, 6, 1, 1, false, true, 1.0f},
      {ops::MoeScoring::kSoftmax, ops::MoeTopk::kGroupLimitedGreedy, 160, 6, 8, 3, false, false, 16.0f},
      {ops::MoeScoring::kSigmoid, ops::MoeTopk::kNoauxTc, 16, 4, 4, 2, true, true, 2.5f},
      {ops::MoeScoring::kSigmoid, ops::MoeTopk::kNoauxTc, 256, 8, 8, 4, true, true, 2.5f},
      {ops::MoeScoring::kSoftmax, ops::MoeTopk::kGreedy, 64, 6, 1, 1, false, false, 1.0f, true},
      {ops::MoeScoring::kSoftmax, ops::MoeTopk::kGreedy, 160, 6, 1, 1, false, true, 1.0f, true},
      {ops::MoeScoring::kSigmoid, ops::MoeTopk::kNoauxTc, 32, 4, 8, 3, false, true, 2.5f, true},
  };
  for (const Case& c : cases)
    for (int64_t n_tokens : {1, 5, 33}) {
      const std::string what = "moe_route experts=" + std::to_string(c.n_experts) + " top_k=" + std::to_string(c.top_k) +
                               " groups=" + std::to_string(c.n_group) + " n_tokens=" + std::to_string(n_tokens) +
                               (c.ties ? " ties" : "");
      const int64_t ld = c.n_experts + 3;
      std::vector<float> logits(static_cast<size_t>(n_tokens * ld), NAN), bias(static_cast<size_t>(c.n_experts));
      // A random permutation of evenly spaced values per row: distinct by far more than rounding.
      std::vector<int32_t> perm(static_cast<size_t>(c.n_experts));
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int32_t e = 0; e < c.n_experts; ++e) perm[static_cast<size_t>(e)] = c.ties ? e / 4 * 4 : e;
        std::shuffle(perm.begin(), perm.end(), rng_);
        for (int32_t e = 0; e < c.n_experts; ++e)
          logits[static_cast<size_t>(t * ld + e)] = -4.0f + 8.0f * static_cast<float>(perm[static_cast<size_t>(e)]) / static_cast<float>(c.n_experts) +
                                                    (c.ties ? 0.3f : 0.0f);  // off 0: no two groups' sigmoid sums 1 alike
      }
      for (int32_t e = 0; e < c.n_experts; ++e) bias[static_cast<size_t>(e)] = 0.001f * static_cast<float>(e % 7);
      const int64_t k = c.top_k, E = c.n_experts;
      std::vector<int32_t> idx0(static_cast<size_t>(n_tokens * k), -1);
      std::vector<float> w0(static_cast<size_t>(n_tokens * k), -1.0f), dense0(static_cast<size_t>(n_tokens * E), -1.0f);
      auto dl = upload(logits), db = upload(bias), di = upload(idx0), dw = upload(w0), dd = upload(dense0);
      ops::MoeRouteParams p{.logits = static_cast<const float*>(dl->ptr()), .ld_logits = ld,
                            .bias = c.bias ? db->ptr() : nullptr, .bias_dtype = DType::kF32, .n_tokens = n_tokens,
                            .n_experts = c.n_experts, .top_k = c.top_k, .n_group = c.n_group, .topk_group = c.topk_group,
                            .scoring = c.scoring, .method = c.method, .norm_topk_prob = c.norm,
                            .routed_scaling_factor = c.scale, .topk_idx = static_cast<int32_t*>(di->ptr()),
                            .topk_weight = static_cast<float*>(dw->ptr()), .dense_weight = static_cast<float*>(dd->ptr())};
      if (!ran(backend()->moe_route(p), ops::OpKind::kMoeRoute, "", what)) continue;
      std::vector<int32_t> got_idx(idx0.size()), want_idx = idx0;
      std::vector<float> got_w(w0.size()), got_d(dense0.size()), want_w = w0, want_d = dense0;
      auto bytes_of = [](const GuardedBuffer& b, void* dst, size_t n) { const auto v = b.download(); std::memcpy(dst, v.data(), n); };
      bytes_of(*di, got_idx.data(), got_idx.size() * sizeof(int32_t));
      bytes_of(*dw, got_w.data(), got_w.size() * sizeof(float));
      bytes_of(*dd, got_d.data(), got_d.size() * sizeof(float));
      p.logits = logits.data(), p.bias = c.bias ? bias.data() : nullptr, p.topk_idx = want_idx.data();
      p.topk_weight = want_w.data(), p.dense_weight = want_d.data();
      ops::ref::moe_route(p);
      EXPECT_EQ(got_idx, want_idx) << what;
      for (size_t i = 0; i < got_w.size(); ++i) EXPECT_NEAR(got_w[i], want_w[i], 1e-5 * c.scale) << what << " weight " << i;
      for (size_t i = 0; i < got_d.size(); ++i) EXPECT_NEAR(got_d[i], want_d[i], 1e-5 * c.scale) << what << " dense " << i;
      for (auto* b : {dl.get(), db.get(), di.get(), dw.get(), dd.get()}) EXPECT_TRUE(b->check_guards(what));
    }
}

void OpCases::scale_rows() {
  for (int64_t dim : {5, 64, 67})
    for (int64_t rows : {1, 7}) {
      const std::string what = "scale_rows dim=" + std::to_string(dim) + " rows=" + std::to_string(rows);
      HostMat x(act(), rows, dim, dim + 2);
      x.fill_random(rng_, 1.0f);
      std::vector<float> scale(static_cast<size_t>(rows * 3));
      for (auto& v : scale) v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng_);
      scale[0] = 0.0f;  // an expert a token did not choose
      auto dx = upload(x), ds = upload(scale);
      ops::ScaleRowsParams p{.x = dx->ptr(), .act_dtype = act(), .ld_x = x.ld, .rows = rows, .dim = dim,
                             .scale = static_cast<const float*>(ds->ptr()), .ld_scale = 3};
      if (!ran(backend()->scale_rows(p), ops::OpKind::kScaleRows, "", what)) continue;
      HostMat got = download(*dx, x), want = x;
      p.x = want.data(), p.scale = scale.data();
      ops::ref::scale_rows(p);
      EXPECT_TRUE(compare_mats(got, want, x, act_tol(), what));
      for (auto* b : {dx.get(), ds.get()}) EXPECT_TRUE(b->check_guards(what));
    }
}

// The routed experts over tokens grouped by expert: dense bf16 experts, each token's top_k
// distinct experts with random weights; odd sizes (scalar loads), sizes of 8 (vector loads) and
// of 32 (whole 32-k quads), tokens for decode GEMVs (n = 1, 7), CUDA's streaming
// kernels (n = 30, 130: 11 to 52 rows per expert on average, one or two 64-row tiles an expert;
// FRUGAL_MOE_STREAM=0 the 16- and 64-row WMMA tiles, with their cp.async pipeline at sizes of
// 32, FRUGAL_MOE_MMA=1 the mma.sync kernels instead), and every token on the same experts
// (n = 7 "same": one expert's rows span several GEMV tiles; CUDA's tiny path takes n = 1 and
// the n = 7 of top_k 2), against the reference to the activation tolerance; then the same as
// three expert-parallel ranks' subset calls. Each with no shared experts, with shared experts
// of shared_inter S (odd, a multiple of 8, and one past the routed inter) as three views, and
// as gate_up in one view too (gate and up rows back to back).
ExpertWeights OpCases::expert_weights(int64_t E, int64_t hidden, int64_t inter, int64_t S) {
  ExpertWeights x;
  x.E = E, x.hidden = hidden, x.inter = inter, x.S = S;
  for (int m = 0; m < 3; ++m)
    for (int64_t e = 0; e < E; ++e) {
      x.w.emplace_back(DType::kBF16, m < 2 ? inter : hidden, m < 2 ? hidden : inter, m < 2 ? hidden : inter);
      x.w.back().fill_random(rng_, 0.3f);
    }
  for (auto& m : x.w) {
    x.dw.push_back(upload(m));
    x.dviews.push_back(ops::dense_weight(x.dw.back()->ptr(), DType::kBF16));
    x.hviews.push_back(ops::dense_weight(m.data(), DType::kBF16));
  }
  const int64_t s = std::max<int64_t>(S, 1);
  x.sgu = HostMat(DType::kBF16, 2 * s, hidden, hidden);
  x.sdown = HostMat(DType::kBF16, hidden, s, s);
  x.sgu.fill_random(rng_, 0.3f);
  x.sdown.fill_random(rng_, 0.3f);
  x.dsgu = upload(x.sgu);
  x.dsdown = upload(x.sdown);
  return x;
}

void ExpertWeights::set_shared(ops::MoeExpertsParams& q, bool device, bool gate_up) const {
  if (S == 0) return;
  const void* gu = device ? dsgu->ptr() : sgu.data();
  q.shared_inter = S;
  q.shared_gate = ops::dense_weight(gu, DType::kBF16);
  q.shared_up = ops::dense_weight(static_cast<const uint8_t*>(gu) + dtype_bytes(DType::kBF16, S * hidden), DType::kBF16);
  q.shared_down = ops::dense_weight(device ? dsdown->ptr() : sdown.data(), DType::kBF16);
  if (gate_up) q.shared_gate_up = q.shared_gate;
}

bool ExpertWeights::check_guards(const std::string& what) const {
  bool ok = dsgu->check_guards(what) && dsdown->check_guards(what);
  for (const auto& b : dw) ok = b->check_guards(what) && ok;
  return ok;
}

void OpCases::moe_experts() {
  struct Case { int64_t hidden, inter; int32_t E, K; int64_t S; };
  for (const Case c : {Case{37, 21, 5, 2, 19}, Case{64, 72, 8, 3, 48}, Case{64, 96, 8, 3, 136}})
    for (int64_t n : {1, 7, 30, 130})
    for (bool same : {false, true})
    for (int shared : {0, 1, 2}) {  // none, three views, and the gate_up view
      if (same && n != 7) continue;
      const int64_t S = shared ? c.S : 0;
      const std::string what = "moe_experts hidden=" + std::to_string(c.hidden) + " inter=" + std::to_string(c.inter) +
                               " experts=" + std::to_string(c.E) + " top_k=" + std::to_string(c.K) + " n=" + std::to_string(n) +
                               (same ? " same experts" : "") +
                               (shared ? " shared_inter=" + std::to_string(S) + (shared == 2 ? " gate_up" : "") : "");
      const int64_t ld_x = c.hidden % 8 == 0 ? c.hidden : c.hidden + 5;
      HostMat x(act(), n, c.hidden, ld_x), out0(act(), n, c.hidden, c.hidden + 3);
      x.fill_random(rng_, 1.0f);
      out0.fill_random(rng_, 1.0f);
      const ExpertWeights ew = expert_weights(c.E, c.hidden, c.inter, S);
      const std::vector<ops::WeightView>& hviews = ew.hviews;
      std::vector<int32_t> idx(static_cast<size_t>(n * c.K)), perm(static_cast<size_t>(c.E));
      std::vector<float> wt(static_cast<size_t>(n * c.K));
      for (int64_t t = 0; t < n; ++t) {
        for (int32_t e = 0; e < c.E; ++e) perm[static_cast<size_t>(e)] = e;
        std::shuffle(perm.begin(), perm.end(), rng_);
        for (int32_t k = 0; k < c.K; ++k) {
          idx[static_cast<size_t>(t * c.K + k)] = same ? k : perm[static_cast<size_t>(k)];
          wt[static_cast<size_t>(t * c.K + k)] = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng_);
        }
      }
      // The shared experts (ew.S: none when `shared` is 0) as three views, or with the gate_up view too.
      auto set_shared = [&](ops::MoeExpertsParams& q, bool device) { ew.set_shared(q, device, shared == 2); };
      const int64_t scratch_bytes = ops::moe_experts_scratch_bytes(n, c.K, c.E, c.hidden, c.inter, S);
      std::vector<uint8_t> scratch0(static_cast<size_t>(scratch_bytes), 0);
      auto dx = upload(x), dout = upload(out0), di = upload(idx), dwt = upload(wt), dv = upload(ew.dviews), ds = upload(scratch0);
      const auto* views = static_cast<const ops::WeightView*>(dv->ptr());
      ops::MoeExpertsParams p{.x = dx->ptr(), .act_dtype = act(), .ld_x = x.ld, .out = dout->ptr(), .ld_out = out0.ld,
                              .n_tokens = n, .hidden = c.hidden, .inter = c.inter, .n_experts = c.E, .top_k = c.K,
                              .topk_idx = static_cast<const int32_t*>(di->ptr()),
                              .topk_weight = static_cast<const float*>(dwt->ptr()), .gate = views, .up = views + c.E,
                              .down = views + 2 * c.E, .format = hviews[0].format, .scratch = ds->ptr(),
                              .scratch_bytes = scratch_bytes};
      set_shared(p, true);
      if (!ran(backend()->moe_experts(p), ops::OpKind::kMoeExperts, "", what)) continue;
      HostMat got = download(*dout, out0), want = out0;
      p.x = x.data(), p.out = want.data(), p.topk_idx = idx.data(), p.topk_weight = wt.data();
      p.gate = hviews.data(), p.up = hviews.data() + c.E, p.down = hviews.data() + 2 * c.E;
      set_shared(p, false);
      ops::ref::moe_experts(p);
      EXPECT_TRUE(compare_mats(got, want, out0, act_tol(), what));
      // Expert parallelism: three ranks' calls into one output, experts [0, a), [a, b) (a subset
      // in the middle), [b, E), each with scratch sized for its own experts (guarded). After each
      // call the output matches the oracle's same calls (a pair routed elsewhere adds nothing;
      // with E = 5 the first rank holds fewer experts than top_k; "same experts" leaves the last
      // rank no pair at all; the tolerance grows by one rounding of out a call), and the three
      // add up to the whole. Each n picks the same CUDA path as the whole call (the rule counts
      // rows per routed expert, or all pairs for the tiny path): tiny or GEMVs (n = 1, 7), the
      // streaming kernels (30, 130). The first rank's call adds the shared experts (a rank adds
      // its share of their channels; here one rank holds them all).
      {
        const int32_t a = c.E / 3, b = 2 * c.E / 3;
        auto dout2 = upload(out0);
        HostMat want2 = out0;
        bool ok = true;
        int calls = 0;
        for (const auto& [first, count] : {std::pair<int32_t, int32_t>{0, a}, {a, b - a}, {b, c.E - b}}) {
          const std::string sub = what + " experts " + std::to_string(first) + ".." + std::to_string(first + count - 1) +
                                  " of " + std::to_string(c.E);
          const int64_t sub_bytes = ops::moe_experts_scratch_bytes(n, c.K, count, c.hidden, c.inter, first == 0 ? S : 0);
          auto ds2 = upload(std::vector<uint8_t>(static_cast<size_t>(sub_bytes), 0));
          ops::MoeExpertsParams q{.x = dx->ptr(), .act_dtype = act(), .ld_x = x.ld, .out = dout2->ptr(),
                                  .ld_out = out0.ld, .n_tokens = n, .hidden = c.hidden, .inter = c.inter,
                                  .n_experts = count, .top_k = c.K, .topk_idx = static_cast<const int32_t*>(di->ptr()),
                                  .topk_weight = static_cast<const float*>(dwt->ptr()), .gate = views + first,
                                  .up = views + c.E + first, .down = views + 2 * c.E + first, .format = hviews[0].format,
                                  .scratch = ds2->ptr(), .scratch_bytes = sub_bytes, .first_expert = first,
                                  .n_routed = c.E};
          if (first == 0) set_shared(q, true);
          ok = ran(backend()->moe_experts(q), ops::OpKind::kMoeExperts, "expert subset", sub);
          if (!ok) break;
          ++calls;  // each call rounds out once more, on the backend and in the oracle
          q.x = x.data(), q.out = want2.data(), q.topk_idx = idx.data(), q.topk_weight = wt.data();
          q.gate = hviews.data() + first, q.up = hviews.data() + c.E + first, q.down = hviews.data() + 2 * c.E + first;
          if (first == 0) set_shared(q, false);
          ops::ref::moe_experts(q);
          EXPECT_TRUE(compare_mats(download(*dout2, out0), want2, out0, calls * act_tol(), sub));
          EXPECT_TRUE(ds2->check_guards(sub));
        }
        if (ok) {
          EXPECT_TRUE(compare_mats(download(*dout2, out0), want, out0, 3 * act_tol(), what + " in three expert subsets"));
          EXPECT_TRUE(dout2->check_guards(what));
        }
      }
      for (auto* b : {dx.get(), dout.get(), di.get(), dwt.get(), dv.get(), ds.get()}) EXPECT_TRUE(b->check_guards(what));
      EXPECT_TRUE(ew.check_guards(what));
    }
  // A subset's reference: the oracle skips other ranks' experts the same way (hand case: two
  // tokens, three experts of one row each, the rank holding expert 1 only).
  {
    const float xs[2] = {1.0f, 2.0f};
    float out[2] = {0.5f, 0.0f};
    const float gate[3] = {1.0f, 2.0f, 3.0f}, up[3] = {1.0f, 1.0f, 1.0f}, down[3] = {1.0f, 10.0f, 100.0f};
    std::vector<ops::WeightView> v = {ops::dense_weight(&gate[1], DType::kF32), ops::dense_weight(&up[1], DType::kF32),
                                      ops::dense_weight(&down[1], DType::kF32)};
    const int32_t idx[4] = {1, 2, 0, 1};  // token 0: experts 1, 2; token 1: experts 0, 1
    const float wt[4] = {0.25f, 0.75f, 0.5f, 0.5f};
    ops::MoeExpertsParams q{.x = xs, .act_dtype = DType::kF32, .ld_x = 1, .out = out, .ld_out = 1, .n_tokens = 2,
                            .hidden = 1, .inter = 1, .n_experts = 1, .top_k = 2, .topk_idx = idx, .topk_weight = wt,
                            .gate = v.data(), .up = v.data() + 1, .down = v.data() + 2, .format = v[0].format,
                            .scratch = nullptr, .scratch_bytes = 0, .first_expert = 1, .n_routed = 3};
    ops::ref::moe_experts(q);
    // expert 1: h = silu(2 x) * x, y = 10 h; token 0 (x 1) weight 0.25, token 1 (x 2) weight 0.5.
    auto silu = [](double v) { return v / (1.0 + std::exp(-v)); };
    EXPECT_NEAR(out[0], 0.5 + 0.25 * 10 * silu(2.0) * 1.0, 1e-5);
    EXPECT_NEAR(out[1], 0.5 * 10 * silu(4.0) * 2.0, 1e-5);
    // With a one-channel shared expert (gate 0.5, up 2, down 3) on top: + 3 silu(0.5 x) 2 x.
    const float sg = 0.5f, su = 2.0f, sd = 3.0f;
    q.shared_inter = 1;
    q.shared_gate = ops::dense_weight(&sg, DType::kF32);
    q.shared_up = ops::dense_weight(&su, DType::kF32);
    q.shared_down = ops::dense_weight(&sd, DType::kF32);
    out[0] = 0.5f, out[1] = 0.0f;
    ops::ref::moe_experts(q);
    EXPECT_NEAR(out[0], 0.5 + 0.25 * 10 * silu(2.0) * 1.0 + 3 * silu(0.5) * 2.0, 1e-5);
    EXPECT_NEAR(out[1], 0.5 * 10 * silu(4.0) * 2.0 + 3 * silu(1.0) * 4.0, 1e-5);
  }
}

// Batched matmuls with strided operands (MLA's per-head projections): heads interleaved in one
// row as the family lays them out, odd k (scalar loads) and k of 8 (vector loads), m from decode
// sizes to past the batched GEMV's limit, bf16 and f32 weights. The last three reach the CUDA
// GEMV's wider variants: over 4K rows in all (several rows a warp, n not a multiple of them),
// k past 256 with a tail (two chunks in flight), and both.
void OpCases::batched_matmul() {
  struct Case { int64_t batch, n, k; DType wt; };
  for (const Case c : {Case{3, 5, 7, DType::kBF16}, Case{4, 24, 64, DType::kBF16}, Case{2, 9, 40, DType::kF32},
                       Case{9, 501, 200, DType::kBF16}, Case{3, 37, 520, DType::kBF16}, Case{10, 450, 264, DType::kBF16}})
    for (int64_t m : {1, 3, 5, 17}) {
      const std::string what = "batched_matmul batch=" + std::to_string(c.batch) + " n=" + std::to_string(c.n) + " k=" +
                               std::to_string(c.k) + " m=" + std::to_string(m) + " w=" + dtype_name(c.wt);
      // x: [m, batch * k] (+ padding), y: [m, batch * n] (+ padding); w: [batch, n, k].
      HostMat x(act(), m, c.batch * c.k, c.batch * c.k + (c.k % 8 == 0 ? 8 : 3));
      HostMat y0(act(), m, c.batch * c.n, c.batch * c.n + 2);
      HostMat w(c.wt, c.batch * c.n, c.k, c.k);
      x.fill_random(rng_, 1.0f);
      y0.fill_random(rng_, 1.0f);
      w.fill_random(rng_, 0.5f);
      auto dx = upload(x), dy = upload(y0), dw = upload(w);
      ops::BatchedMatmulParams p{.x = dx->ptr(), .x_dtype = act(), .ld_x = x.ld, .stride_x = c.k, .w = dw->ptr(),
                                 .w_dtype = c.wt, .stride_w = c.n * c.k, .y = dy->ptr(), .y_dtype = act(), .ld_y = y0.ld,
                                 .stride_y = c.n, .batch = c.batch, .m = m, .n = c.n, .k = c.k};
      if (!ran(backend()->batched_matmul(p), ops::OpKind::kBatchedMatmul, "", what)) continue;
      HostMat got = download(*dy, y0), want = y0;
      p.x = x.data(), p.w = w.data(), p.y = want.data();
      ops::ref::batched_matmul(p);
      EXPECT_TRUE(compare_mats(got, want, y0, act_tol(), what));
      for (auto* b : {dx.get(), dy.get(), dw.get()}) EXPECT_TRUE(b->check_guards(what));
    }
  batched_matmul_strided();
}

// Past the batched GEMV (CUDA: one strided-batched cuBLASLt matmul) in MLA's layouts: heads side
// by side in x's and y's rows with gaps between them (stride < ld), w's heads further apart than
// one [n, k] matrix and starting inside a larger one (W_UV's rows inside kv_b), x and w in every
// float dtype with y in theirs and in f32, and x/w of different dtypes. The first shape keeps
// every pointer, ld and stride 16-byte aligned (MLA's own); the second's odd n, k and gaps leave
// batch strides 2- or 4-byte aligned. The same layouts at decode-sized m check the batched GEMV.
void OpCases::batched_matmul_strided() {
  struct Case { int64_t batch, m, n, k, head_gap, w_skip_rows, row_gap; };
  auto run_case = [&](const Case& c, DType xt, DType wt, DType yt) {
    const int64_t sx = c.k + c.head_gap, sy = c.n + c.head_gap, sw = (c.n + c.w_skip_rows) * c.k;
    const std::string what = "batched_matmul batch=" + std::to_string(c.batch) + " m=" + std::to_string(c.m) + " n=" +
                             std::to_string(c.n) + " k=" + std::to_string(c.k) + " stride_x=" + std::to_string(sx) +
                             " stride_y=" + std::to_string(sy) + " stride_w=" + std::to_string(sw) + " x=" + tag(xt) +
                             " w=" + tag(wt) + " y=" + tag(yt);
    HostMat x(xt, c.m, c.batch * sx, c.batch * sx + c.row_gap), y0(yt, c.m, c.batch * sy, c.batch * sy + c.row_gap);
    HostMat w(wt, c.w_skip_rows + c.batch * (c.n + c.w_skip_rows), c.k, c.k);
    x.fill_random(rng_, 1.0f);
    y0.fill_random(rng_, 1.0f);
    w.fill_random(rng_, 0.5f);
    auto dx = upload(x), dy = upload(y0), dw = upload(w);
    const int64_t w_off = dtype_bytes(wt, c.w_skip_rows * c.k);
    ops::BatchedMatmulParams p{.x = dx->ptr(), .x_dtype = xt, .ld_x = x.ld, .stride_x = sx,
                               .w = static_cast<const uint8_t*>(dw->ptr()) + w_off, .w_dtype = wt, .stride_w = sw,
                               .y = dy->ptr(), .y_dtype = yt, .ld_y = y0.ld, .stride_y = sy, .batch = c.batch, .m = c.m,
                               .n = c.n, .k = c.k};
    if (!ran(backend()->batched_matmul(p), ops::OpKind::kBatchedMatmul, "x=" + tag(xt), what)) return;
    // Cells between heads (inside cols) must keep y0's values, as the gaps must (compare_mats).
    HostMat got = download(*dy, y0), want = y0;
    p.x = x.data(), p.w = static_cast<const uint8_t*>(w.data()) + w_off, p.y = want.data();
    ops::ref::batched_matmul(p);
    EXPECT_TRUE(compare_mats(got, want, y0, yt == DType::kF32 ? 2e-4 : 2e-2, what));
    for (auto* b : {dx.get(), dy.get(), dw.get()}) EXPECT_TRUE(b->check_guards(what));
  };
  for (const Case c : {Case{16, 24, 32, 40, 8, 0, 8}, Case{5, 33, 13, 11, 3, 2, 3}, Case{3, 20, 64, 72, 0, 5, 8},
                       Case{16, 9, 32, 40, 8, 0, 8}, Case{5, 5, 13, 11, 3, 2, 3}}) {  // the last two: the GEMV's m
    for (DType xt : kFloatTypes) {
      run_case(c, xt, xt, xt);
      if (xt != DType::kF32) run_case(c, xt, xt, DType::kF32);
    }
    run_case(c, act(), act() == DType::kF32 ? DType::kBF16 : DType::kF32, act());  // x/w dtypes differ
  }
}

void OpCases::run(ops::OpKind k) {
  switch (k) {
#define FRUGAL_OP_CASES_RUN_(Name, method) \
  case ops::OpKind::k##Name: return method();
    FRUGAL_OPS(FRUGAL_OP_CASES_RUN_)
    FRUGAL_FUSED_OPS(FRUGAL_OP_CASES_RUN_)
#undef FRUGAL_OP_CASES_RUN_
#define FRUGAL_OP_CASES_OPTIONAL_(Name, method) case ops::OpKind::k##Name:
    FRUGAL_OPTIONAL_OPS(FRUGAL_OP_CASES_OPTIONAL_)
#undef FRUGAL_OP_CASES_OPTIONAL_
      break;  // optional ops have their own tests (sample_test.cpp)
  }
  ADD_FAILURE() << "the op harness has no cases for op " << ops::op_kind_name(k);
}

// One test per op of ops/op_list.h: a new op without harness cases does not compile.
#define FRUGAL_OP_HARNESS_TEST_(Name, method)                                                    \
  TEST_P(OpHarness, Name) {                                                                     \
    cases().method();                                                                            \
    std::printf("  %s: %d cases ran, %d refused as the support table expects\n", #method,       \
                cases().n_ran(), cases().n_refused());                                           \
    EXPECT_GT(cases().n_ran() + cases().n_refused(), 0) << "no " #method " cases";              \
  }
FRUGAL_OPS(FRUGAL_OP_HARNESS_TEST_)
FRUGAL_FUSED_OPS(FRUGAL_OP_HARNESS_TEST_)
#undef FRUGAL_OP_HARNESS_TEST_

}  // namespace frugal::testing
