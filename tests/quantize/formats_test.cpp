// Format primitives against hand-computed cases and independent implementations: the fp8
// encoder against core's exhaustive nearest-value search, the packings against the published
// bit layouts (AutoAWQ 0x75316420, GPTQ 0x76543210, 8-bit 0x04030201, bitsandbytes high nibble
// first), the RTN rules against hand-worked groups, GPTQ against RTN where they must agree, and
// the (format, method) errors.
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "quantize/formats.h"
#include "quantize/methods.h"
#include "quantize/packing.h"
#include "quantize/rtn.h"

namespace frugal::quantize {
namespace {

uint32_t word(const OutTensor& t, size_t i) {
  uint32_t w;
  std::memcpy(&w, t.data.data() + 4 * i, 4);
  return w;
}

const OutTensor& by_name(const std::vector<OutTensor>& ts, const std::string& n) {
  for (const auto& t : ts)
    if (t.name == n) return t;
  ADD_FAILURE() << "no tensor " << n;
  return ts[0];
}

TEST(QuantizeFormats, Fp8EncoderMatchesNearestValueSearch) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mag(-12.0f, 9.5f);
  for (int i = 0; i < 20000; ++i) {
    const float v = (i % 2 ? -1.0f : 1.0f) * std::exp2(mag(rng));
    ASSERT_EQ(fp8_e4m3_encode(v), f32_to_f8e4m3(v)) << v;
  }
  for (int c = 0; c < 0x7f; ++c) {  // every code and every midpoint between neighbours
    const float a = f8e4m3_to_f32(static_cast<uint8_t>(c));
    ASSERT_EQ(fp8_e4m3_encode(a), c);
    const float mid = 0.5f * (a + f8e4m3_to_f32(static_cast<uint8_t>(c + 1)));
    if (c + 1 < 0x7f) {
      ASSERT_EQ(fp8_e4m3_encode(mid), f32_to_f8e4m3(mid)) << mid;
    }
  }
  EXPECT_EQ(fp8_e4m3_encode(1000.0f), 0x7e);   // saturates at 448
  EXPECT_EQ(fp8_e4m3_encode(-1000.0f), 0xfe);
}

// An IntQuant [8, 8] whose row o holds codes (o + i) % 16 and zero z[g][o] = o.
IntQuant toy(int bits, int64_t out, int64_t in, int64_t group) {
  IntQuant q;
  q.spec = {.scheme = IntScheme::kGptqAsym, .bits = bits, .group = group};
  q.out = out;
  q.in = in;
  q.group = group;
  const int maxq = (1 << bits) - 1;
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) q.q.push_back(static_cast<int32_t>((o + i) % (maxq + 1)));
  for (int64_t g = 0; g < in / group; ++g)
    for (int64_t o = 0; o < out; ++o) {
      q.scale.push_back(0.5f);
      q.zero.push_back(static_cast<int32_t>(1 + o % maxq));
    }
  for (int64_t i = 0; i < in; ++i) q.g_idx.push_back(static_cast<int32_t>(i / group));
  return q;
}

TEST(QuantizeFormats, AwqPackingNibbleOrder) {
  IntQuant q = toy(4, 8, 8, 8);
  // Input row 0 holds codes o for columns o = 0..7: AutoAWQ stores columns 0,2,4,6,1,3,5,7 in
  // nibbles 0..7 -> 0x75316420.
  auto ts = pack_awq("t", q);
  ASSERT_TRUE(ts.is_ok());
  EXPECT_EQ(word(by_name(*ts, "qweight"), 0), 0x75316420u);
  EXPECT_EQ(by_name(*ts, "qweight").shape, (std::vector<int64_t>{8, 1}));
  // Zeros 1..8 are stored as they are, in the same nibble order.
  EXPECT_EQ(word(by_name(*ts, "qzeros"), 0), 0x86427531u);
}

TEST(QuantizeFormats, GptqPackingAlongInputAndZeroMinusOne) {
  IntQuant q = toy(4, 8, 8, 8);
  auto ts = pack_gptq("t", q, /*v2=*/false);
  ASSERT_TRUE(ts.is_ok());
  // Output column 0 holds codes 0..7 down the input rows: lowest bits first -> 0x76543210.
  EXPECT_EQ(word(by_name(*ts, "qweight"), 0), 0x76543210u);
  EXPECT_EQ(by_name(*ts, "qweight").shape, (std::vector<int64_t>{1, 8}));
  // v1 stores zero - 1: zeros 1..8 -> 0..7 along the output axis -> 0x76543210.
  EXPECT_EQ(word(by_name(*ts, "qzeros"), 0), 0x76543210u);
  auto v2 = pack_gptq("t", q, /*v2=*/true);
  EXPECT_EQ(word(by_name(*v2, "qzeros"), 0), 0x87654321u);
  IntQuant q8 = toy(8, 4, 4, 4);
  auto t8 = pack_gptq("t", q8, false);
  ASSERT_TRUE(t8.is_ok());
  // Column 0 codes 0,1,2,3 -> bytes low first 0x03020100; column 1 codes 1,2,3,4.
  EXPECT_EQ(word(by_name(*t8, "qweight"), 0), 0x03020100u);
  EXPECT_EQ(word(by_name(*t8, "qweight"), 1), 0x04030201u);
}

TEST(QuantizeFormats, PackUnpackRoundTrip) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> w(64 * 256);
  for (auto& v : w) v = nd(rng);
  for (IntScheme s : {IntScheme::kAwq, IntScheme::kGptqAsym, IntScheme::kGptqSym}) {
    auto q = rtn_int("t", w.data(), 64, 256, {.scheme = s, .bits = 4, .group = 64});
    ASSERT_TRUE(q.is_ok());
    const bool awq = s == IntScheme::kAwq;
    auto ts = awq ? pack_awq("t", *q) : pack_gptq("t", *q, false);
    ASSERT_TRUE(ts.is_ok());
    std::vector<model::TensorEntry> es;
    for (const auto& t : *ts) {
      model::TensorEntry e;
      e.name = t.name;
      e.dtype = t.dtype;
      e.shape = Shape::of(t.shape);
      e.data = t.data.data();
      e.nbytes = static_cast<int64_t>(t.data.size());
      es.push_back(e);
    }
    TensorFinder find = [&](const std::string& rel) -> const model::TensorEntry* {
      for (const auto& e : es)
        if (e.name == rel) return &e;
      return nullptr;
    };
    StoredLayout l{.layout = awq ? Layout::kAwqGemm : Layout::kGptq, .bits = 4, .group = 64,
                   .gptq_v2 = false, .sym = s == IntScheme::kGptqSym, .desc_act = false, .static_groups = false,
                   .fp8 = Fp8Scale::kBlock};
    int64_t out = 0, in = 0;
    auto deq = read_quantized_linear("t", find, l, &out, &in);
    ASSERT_TRUE(deq.is_ok()) << deq.status().to_string();
    EXPECT_EQ(out, 64);
    EXPECT_EQ(in, 256);
    EXPECT_EQ(*deq, q->dequantize());
  }
}

TEST(QuantizeFormats, RtnRulesOnHandWorkedGroups) {
  // AWQ: min -1, max 2 -> s = 3/15 = 0.2 (f16 0.199951171875), z = -round(-1/s) = 5.
  const float g[4] = {-1.0f, 0.0f, 0.5f, 2.0f};
  const GroupParams a = find_group_params({.scheme = IntScheme::kAwq, .bits = 4, .group = 4}, g, 4, 1);
  EXPECT_EQ(a.scale, round_f16(0.2f));
  EXPECT_EQ(a.zero, 5);
  EXPECT_EQ(quantize_code(2.0f, a, 0, 15), 15);
  EXPECT_EQ(quantize_code(-1.0f, a, 0, 15), 0);
  // GPTQ sym 4-bit: amax 2 -> s = 4/15, zero 8.
  const GroupParams s = find_group_params({.scheme = IntScheme::kGptqSym, .bits = 4, .group = 4}, g, 4, 1);
  EXPECT_EQ(s.scale, round_f16(4.0f / 15.0f));
  EXPECT_EQ(s.zero, 8);
  // compressed-tensors int8: amax 2 -> s = bf16(2/127), codes -64..127.
  const GroupParams c = find_group_params({.scheme = IntScheme::kCtInt8, .bits = 8, .group = 4}, g, 4, 1);
  EXPECT_EQ(c.scale, round_bf16(2.0f / 127.0f));
  EXPECT_EQ(quantize_code(2.0f, c, -128, 127), 127);
  // NF4: a block [1, -1, 0, 0.5]: absmax 1; 0.5 is nearest to 0.4407 (code 12).
  const float nb[4] = {1.0f, -1.0f, 0.0f, 0.5f};
  auto n = rtn_nf4("t", nb, 1, 4, 4);
  ASSERT_TRUE(n.is_ok());
  EXPECT_EQ(n->idx, (std::vector<uint8_t>{15, 0, 7, 12}));
  const auto packed = pack_nf4(*n, "bfloat16");
  EXPECT_EQ(packed[0].data, (std::vector<uint8_t>{0xf0, 0x7c}));  // earlier element in the high nibble
}

TEST(QuantizeFormats, GptqEqualsRtnWhenInputsAreOrthogonal) {
  // X = 3 I (k rows): H = 2/k X^T X is diagonal, so no error propagates and GPTQ's codes are RTN's.
  const int64_t out = 16, in = 32;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<float> w(out * in), x(in * in, 0.0f);
  for (auto& v : w) v = nd(rng);
  for (int64_t i = 0; i < in; ++i) x[i * in + i] = 3.0f;
  const IntSpec spec{.scheme = IntScheme::kGptqAsym, .bits = 4, .group = 8};
  auto g = gptq_quantize("t", w, out, in, gptq_hessian(x, in, in), {.spec = spec});
  auto r = rtn_int("t", w.data(), out, in, spec);
  ASSERT_TRUE(g.is_ok() && r.is_ok());
  EXPECT_EQ(g->q, r->q);
  EXPECT_EQ(g->scale, r->scale);
}

TEST(QuantizeFormats, GptqBeatsRtnOnCorrelatedInputs) {
  const int64_t out = 32, in = 64, n = 256;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  std::vector<float> w(out * in), x(n * in);
  for (auto& v : w) v = nd(rng);
  for (int64_t t = 0; t < n; ++t) {
    const float common = nd(rng);
    for (int64_t j = 0; j < in; ++j) x[t * in + j] = common * (1.0f + 0.1f * static_cast<float>(j % 5)) + 0.3f * nd(rng) * (j % 7 == 0 ? 8.0f : 1.0f);
  }
  for (bool act : {false, true}) {
    for (bool stat : {false, true}) {
      const IntSpec spec{.scheme = IntScheme::kGptqAsym, .bits = 4, .group = 16};
      auto g = gptq_quantize("t", w, out, in, gptq_hessian(x, n, in), {.spec = spec, .act_order = act, .static_groups = stat});
      auto r = rtn_int("t", w.data(), out, in, spec);
      ASSERT_TRUE(g.is_ok() && r.is_ok());
      const double eg = relative_output_error(x, n, {}, w, g->dequantize(), out, in);
      const double er = relative_output_error(x, n, {}, w, r->dequantize(), out, in);
      EXPECT_LT(eg, 0.8 * er) << "act_order " << act << " static " << stat;
      if (act && !stat) {  // groups follow the permutation: every group holds `group` columns
        std::vector<int> count(4, 0);
        for (int32_t gi : g->g_idx) ++count[gi];
        EXPECT_EQ(count, (std::vector<int>{16, 16, 16, 16}));
      }
    }
  }
}

TEST(QuantizeFormats, UnsupportedCombinationsNameTheFlags) {
  auto err = [](QuantizeOptions o) { return choose_layout(o).status().message(); };
  EXPECT_NE(err({.format = Format::kInt4, .method = Method::kSmoothQuant}).find("--format int4 with --method smoothquant"), std::string::npos);
  EXPECT_NE(err({.format = Format::kInt8, .method = Method::kAwq}).find("4-bit only"), std::string::npos);
  EXPECT_NE(err({.format = Format::kFp8, .method = Method::kGptq}).find("--method rtn"), std::string::npos);
  EXPECT_NE(err({.format = Format::kNf4, .method = Method::kAwq}).find("nf4"), std::string::npos);
  EXPECT_NE(err({.format = Format::kInt4, .method = Method::kAwq, .sym = true}).find("--sym"), std::string::npos);
  EXPECT_NE(err({.format = Format::kInt4, .method = Method::kRtn, .act_order = true}).find("--act-order"), std::string::npos);
  EXPECT_NE(err({.format = Format::kFp8, .group_size = 64}).find("--group-size"), std::string::npos);
  EXPECT_NE(err({.format = Format::kInt4, .group_size = 12}).find("--group-size 12"), std::string::npos);
  EXPECT_TRUE(choose_layout({.format = Format::kInt4, .method = Method::kGptq, .sym = true, .act_order = true}).is_ok());
  EXPECT_NE(resolve_group("model.layers.0.mlp.down_proj", 320, 128).status().message().find("does not divide the input dimension 320 of model.layers.0.mlp.down_proj"),
            std::string::npos);
}

}  // namespace
}  // namespace frugal::quantize
