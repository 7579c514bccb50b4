// Weight formats as data (ops/weight_format.h) and the op list (ops/op_list.h): a matmul with a
// weight format no backend defines is refused with an error naming it, on the CPU backend and
// on the reference backend (the CUDA case is in tests/cuda/cuda_ops_test.cpp); every listed
// scheme and op has a name.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "ops/ref_backend.h"
#include "ops/weight_format_check.h"

namespace frugal::ops {
namespace {

bool mentions(const Status& st, const std::string& text) { return st.message().find(text) != std::string::npos; }

struct SmallMatmul {
  std::vector<float> x = std::vector<float>(2 * 4, 1.0f), w = std::vector<float>(3 * 4, 1.0f), y = std::vector<float>(2 * 3);
  MatmulParams params() {
    return {.x = x.data(), .x_dtype = DType::kF32, .ld_x = 4, .w = dense_weight(w.data(), DType::kF32),
            .bias = nullptr, .bias_dtype = DType::kF32, .y = y.data(), .y_dtype = DType::kF32, .ld_y = 3,
            .m = 2, .n = 3, .k = 4, .accumulate = false};
  }
};

std::vector<std::unique_ptr<Backend>> backends() {
  std::vector<std::unique_ptr<Backend>> v;
  v.push_back(make_cpu_backend());
  v.push_back(make_ref_backend());
  return v;
}

TEST(WeightFormat, UnknownSchemeIsRefusedByName) {
  for (auto& b : backends()) {
    SmallMatmul mm;
    MatmulParams p = mm.params();
    ASSERT_TRUE(b->matmul(p).is_ok()) << b->name();
    p.w.format.scheme = static_cast<WeightScheme>(77);
    const Status st = b->matmul(p);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << b->name() << ": " << st.to_string();
    EXPECT_TRUE(mentions(st, "weight format 'scheme#77 f32'")) << b->name() << ": " << st.to_string();
    EXPECT_TRUE(mentions(st, "unknown weight scheme 77 (known: dense, int8, int4, nf4, fp8)")) << b->name() << ": " << st.to_string();
  }
}

TEST(WeightFormat, DenseWithOtherDtypeIsRefusedByName) {
  for (auto& b : backends()) {
    SmallMatmul mm;
    MatmulParams p = mm.params();
    for (DType t : {DType::kI8, DType::kI4, DType::kF8E4M3, DType::kF64}) {
      p.w.format = dense_format(t);
      const Status st = b->matmul(p);
      EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << b->name() << ": " << st.to_string();
      EXPECT_TRUE(mentions(st, std::string("weight format 'dense ") + dtype_name(t) + "'"))
          << b->name() << ": " << st.to_string();
    }
  }
}

TEST(WeightFormat, DenseWithQuantizationFieldsIsRefusedByName) {
  for (auto& b : backends()) {
    SmallMatmul mm;
    MatmulParams p = mm.params();
    p.w.format.group_k = 128;
    Status st = b->matmul(p);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << b->name();
    EXPECT_TRUE(mentions(st, "'dense f32 group_k=128'")) << b->name() << ": " << st.to_string();
    p.w.format = dense_format(DType::kF32);
    p.w.format.zero = ZeroPoint::kOffset;
    st = b->matmul(p);
    EXPECT_TRUE(mentions(st, "zero=offset(f32)")) << b->name() << ": " << st.to_string();
    p.w.format = dense_format(DType::kF32);
    p.w.format.act_quant = ActivationQuant::kDynamicPerToken;
    st = b->matmul(p);
    EXPECT_TRUE(mentions(st, "act_quant=dynamic_per_token")) << b->name() << ": " << st.to_string();
    p.w.format = dense_format(DType::kF32);
    const float scale = 1.0f;
    p.w.scales = &scale;
    st = b->matmul(p);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << b->name();
    EXPECT_TRUE(mentions(st, "dense weights take no scales")) << b->name() << ": " << st.to_string();
  }
}

TEST(WeightFormat, EverySchemeHasANameAndItsDefaultIsValid) {
  std::set<std::string> names;
#define FRUGAL_TEST_SCHEME_(Name, str)                                              \
  {                                                                                 \
    ASSERT_NE(weight_scheme_name(WeightScheme::k##Name), nullptr);                  \
    EXPECT_EQ(std::string(weight_scheme_name(WeightScheme::k##Name)), str);         \
    EXPECT_TRUE(names.insert(str).second) << "duplicate scheme name " << str;      \
  }
  FRUGAL_WEIGHT_SCHEMES(FRUGAL_TEST_SCHEME_)
#undef FRUGAL_TEST_SCHEME_
  EXPECT_EQ(weight_scheme_name(static_cast<WeightScheme>(200)), nullptr);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    EXPECT_TRUE(check_weight_format(dense_format(t), "test").is_ok()) << dtype_name(t);
    EXPECT_EQ(weight_format_name(dense_format(t)), std::string("dense ") + dtype_name(t));
  }
}

// kOutInTiles8 (the CUDA backend's int4 / int8 layout, ops/weight_format.h): byte b of row o at
// (o / 8) 8 row_bytes + (b / 64) 512 + (o % 8) 64 + b % 64. The reference backend reads it (its
// matmul equals the row-major weight's exactly); the CPU backend, whose kernels read rows,
// refuses it by name; the format check takes it for int4 / int8 without act order only.
TEST(WeightFormat, Tiles8IsReadByTheReferenceAndRefusedByTheCpu) {
  const int64_t n = 24, k = 256, m = 3;
  for (WeightScheme scheme : {WeightScheme::kInt4, WeightScheme::kInt8}) {
    const WeightFormat f = quant_format(scheme, k, 128, true, 1);
    const int64_t rb = weight_row_bytes(f, k);
    ASSERT_EQ(rb, scheme == WeightScheme::kInt4 ? k / 2 : k);
    std::vector<uint8_t> codes(static_cast<size_t>(n * rb)), tiled(codes.size());
    std::vector<float> scales(static_cast<size_t>(n * 2)), zeros(scales.size()), x(static_cast<size_t>(m * k));
    uint32_t h = 12345;
    auto next = [&] { return h = h * 1664525u + 1013904223u; };
    for (auto& c : codes) c = static_cast<uint8_t>(next() >> 24);
    for (auto& v : scales) v = 0.01f + static_cast<float>(next() >> 24) / 25600.0f;
    for (auto& v : zeros) v = static_cast<float>(static_cast<int>(next() >> 24) - 128) / 1280.0f;
    for (auto& v : x) v = static_cast<float>(static_cast<int>(next() >> 24) - 128) / 128.0f;
    for (int64_t o = 0; o < n; ++o)
      for (int64_t b = 0; b < rb; ++b)
        tiled[static_cast<size_t>((o / 8) * 8 * rb + (b / 64) * 512 + (o % 8) * 64 + b % 64)] = codes[static_cast<size_t>(o * rb + b)];
    WeightView rows{.data = codes.data(), .format = f, .scales = scales.data(), .zeros = zeros.data()};
    WeightView tiles = rows;
    tiles.data = tiled.data();
    tiles.format.layout = WeightLayout::kOutInTiles8;
    std::vector<float> y0(static_cast<size_t>(m * n)), y1(y0.size()), y2(y0.size());
    auto params = [&](const WeightView& w, std::vector<float>& y) {
      return MatmulParams{.x = x.data(), .x_dtype = DType::kF32, .ld_x = k, .w = w, .bias = nullptr,
                          .bias_dtype = DType::kF32, .y = y.data(), .y_dtype = DType::kF32, .ld_y = n,
                          .m = m, .n = n, .k = k, .accumulate = false};
    };
    const std::string what = weight_scheme_name(scheme);
    auto ref = make_ref_backend();
    ASSERT_TRUE(ref->matmul(params(rows, y0)).is_ok()) << what;
    const Status st = ref->matmul(params(tiles, y1));
    ASSERT_TRUE(st.is_ok()) << what << ": " << st.to_string();
    EXPECT_EQ(y0, y1) << what;
    double mag = 0;
    for (float v : y0) mag += std::abs(v);
    EXPECT_GT(mag, 1.0) << what;  // not all zeros
    auto cpu = make_cpu_backend();
    ASSERT_TRUE(cpu->matmul(params(rows, y2)).is_ok()) << what;
    const Status refused = cpu->matmul(params(tiles, y2));
    EXPECT_FALSE(refused.is_ok()) << what;
    EXPECT_TRUE(mentions(refused, "out_in_tiles8")) << refused.to_string();
    EXPECT_TRUE(check_weight_format(tiles.format, "t").is_ok()) << what;
    WeightFormat perm = tiles.format;
    perm.act_order = true;
    EXPECT_FALSE(check_weight_format(perm, "t").is_ok()) << what;
    EXPECT_EQ(weight_row_step(tiles.format), 8);
    EXPECT_EQ(weight_row_step(f), 1);
    EXPECT_TRUE(tiles8_fits(f, 24, 256)) << what;
    EXPECT_FALSE(tiles8_fits(f, 20, 256)) << what;                                    // a partial tile
    EXPECT_FALSE(tiles8_fits(f, 24, scheme == WeightScheme::kInt4 ? 288 : 224)) << what;  // a partial quad
    EXPECT_FALSE(tiles8_fits(tiles.format, 24, 256)) << what;                         // already tiled
    WeightFormat ao = f;
    ao.act_order = true;
    EXPECT_FALSE(tiles8_fits(ao, 24, 256)) << what;
  }
  WeightFormat f8 = quant_format(WeightScheme::kFp8, 256, 128, false, 128);
  EXPECT_FALSE(tiles8_fits(f8, 256, 256));  // W8A8's cuBLASLt GEMM reads fp8 rows
  f8.layout = WeightLayout::kOutInTiles8;
  EXPECT_FALSE(check_weight_format(f8, "t").is_ok());
}

TEST(OpList, EveryOpHasAUniqueName) {
  std::set<std::string> names;
  for (int i = 0; i < kNumOpKinds; ++i) {
    const std::string n = op_kind_name(static_cast<OpKind>(i));
    EXPECT_NE(n, "?");
    EXPECT_TRUE(names.insert(n).second) << n;
  }
  // 12 required ops (moe_route, scale_rows, moe_experts, batched_matmul for DeepSeek), sample, and
  // the fused rope_kv_write, matmul_rope_kv_write, matmul_silu_mul, silu_mul_matmul, mla_kv_prologue,
  // moe_router, moe_block, rms_norm_matmul, matmul_rms_norm, attention_batched_matmul and mla_attention
  EXPECT_EQ(names.size(), 24u);
  EXPECT_TRUE(op_is_required(OpKind::kMatmul));
  EXPECT_FALSE(op_is_required(OpKind::kSample));
  EXPECT_TRUE(op_is_required(OpKind::kRopeKvWrite));  // every backend has it (the default runs the sequence)
  EXPECT_TRUE(op_is_required(OpKind::kMlaKvPrologue));
  EXPECT_TRUE(op_is_required(OpKind::kMoeRouter));
  EXPECT_TRUE(op_is_required(OpKind::kMoeBlock));
  EXPECT_TRUE(op_is_required(OpKind::kRmsNormMatmul));
  EXPECT_TRUE(op_is_required(OpKind::kMatmulRmsNorm));
  EXPECT_TRUE(op_is_required(OpKind::kMatmulRopeKvWrite));
  EXPECT_TRUE(op_is_required(OpKind::kAttentionBatchedMatmul));
}

}  // namespace
}  // namespace frugal::ops
