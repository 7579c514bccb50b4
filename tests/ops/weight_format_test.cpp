// Weight formats as data (ops/weight_format.h) and the op list (ops/op_list.h): a matmul with a
// weight format no backend defines is refused with an error naming it, on the CPU backend and
// on the reference backend (the CUDA case is in tests/cuda/cuda_ops_test.cpp); every listed
// scheme and op has a name.
#include <gtest/gtest.h>

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

TEST(OpList, EveryOpHasAUniqueName) {
  std::set<std::string> names;
  for (int i = 0; i < kNumOpKinds; ++i) {
    const std::string n = op_kind_name(static_cast<OpKind>(i));
    EXPECT_NE(n, "?");
    EXPECT_TRUE(names.insert(n).second) << n;
  }
  // 12 required ops (moe_route, scale_rows, moe_experts, batched_matmul for DeepSeek), sample, and
  // the fused rope_kv_write, matmul_silu_mul, silu_mul_matmul, mla_kv_prologue, moe_router
  // and rms_norm_matmul
  EXPECT_EQ(names.size(), 19u);
  EXPECT_TRUE(op_is_required(OpKind::kMatmul));
  EXPECT_FALSE(op_is_required(OpKind::kSample));
  EXPECT_TRUE(op_is_required(OpKind::kRopeKvWrite));  // every backend has it (the default runs the sequence)
  EXPECT_TRUE(op_is_required(OpKind::kMlaKvPrologue));
  EXPECT_TRUE(op_is_required(OpKind::kMoeRouter));
  EXPECT_TRUE(op_is_required(OpKind::kRmsNormMatmul));
}

}  // namespace
}  // namespace frugal::ops
