// The op harness cases: each OpCases::<op>() runs many cases of one op on the backend under test
// and on ops::ref with the same (dtype-rounded) host inputs. A refusal (Status kUnsupported)
// passes only where the backend's SupportTable lists it; any other error fails. The TEST_Ps are
// generated from ops/op_list.h at the end of this file.
#include "harness.h"

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
          const int64_t gap = variant++ % 2 ? 6 : 0;
          const std::string what = "rope head_dim=" + std::to_string(head_dim) + " rotary_dim=" +
                                   std::to_string(rotary_dim) + " n_tokens=" + std::to_string(n_tokens) +
                                   (with_k ? " q+k" : " q only") + " gap=" + std::to_string(gap);
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
                            .head_dim = head_dim, .rotary_dim = rotary_dim, .attention_factor = factor};
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
  for (DType cache_t : {DType::kF32, DType::kBF16})
    for (int32_t head_dim : {64, 12})
      for (int32_t block_size : {4, 5}) {
        const int32_t n_blocks = 6, n_head_kv = 2, n_tokens = 7;
        const int64_t row = int64_t{n_head_kv} * head_dim, gap = head_dim == 12 ? 3 : 0;
        const std::string what = "kv_write cache=" + tag(cache_t) + " head_dim=" + std::to_string(head_dim) +
                                 " block_size=" + std::to_string(block_size);
        HostMat k(act(), n_tokens, row, row + gap), v(act(), n_tokens, row, row + gap);
        k.fill_random(rng_, 1.0f);
        v.fill_random(rng_, 1.0f);
        const int64_t n_slots = int64_t{n_blocks} * block_size;
        HostMat kc(cache_t, n_slots, row, row), vc(cache_t, n_slots, row, row);
        kc.fill_random(rng_, 1.0f);
        vc.fill_random(rng_, 1.0f);
        std::vector<int32_t> slots(static_cast<size_t>(n_slots));
        std::iota(slots.begin(), slots.end(), 0);
        std::shuffle(slots.begin(), slots.end(), rng_);
        slots.resize(n_tokens);
        slots[3] = -1;  // a padding token: skipped
        auto dk = upload(k), dv = upload(v), dkc = upload(kc), dvc = upload(vc), dslots = upload(slots);
        ops::KvWriteParams p{
            .cache = {.k_cache = dkc->ptr(), .v_cache = dvc->ptr(), .cache_dtype = cache_t, .n_blocks = n_blocks,
                      .block_size = block_size, .n_head_kv = n_head_kv, .head_dim = head_dim},
            .k = dk->ptr(), .v = dv->ptr(), .act_dtype = act(), .ld_k = k.ld, .ld_v = v.ld,
            .slot_mapping = static_cast<const int32_t*>(dslots->ptr()), .n_tokens = n_tokens};
        if (!ran(backend()->kv_write(p), ops::OpKind::kKvWrite, "cache=" + tag(cache_t), what)) continue;
        HostMat got_k = download(*dkc, kc), got_v = download(*dvc, vc), want_k = kc, want_v = vc;
        p.cache.k_cache = want_k.data(), p.cache.v_cache = want_v.data(), p.k = k.data(), p.v = v.data();
        p.slot_mapping = slots.data();
        ops::ref::kv_write(p);
        // A copy with one rounding: must be exact.
        EXPECT_TRUE(compare_mats(got_k, want_k, kc, 0.0, what + " (k cache)"));
        EXPECT_TRUE(compare_mats(got_v, want_v, vc, 0.0, what + " (v cache)"));
        for (auto* b : {dk.get(), dv.get(), dkc.get(), dvc.get(), dslots.get()}) EXPECT_TRUE(b->check_guards(what));
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

void OpCases::run(ops::OpKind k) {
  switch (k) {
#define FRUGAL_OP_CASES_RUN_(Name, method) \
  case ops::OpKind::k##Name: return method();
    FRUGAL_OPS(FRUGAL_OP_CASES_RUN_)
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
#undef FRUGAL_OP_HARNESS_TEST_

}  // namespace frugal::testing
