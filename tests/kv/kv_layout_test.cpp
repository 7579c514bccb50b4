// Expected sizes are worked out by hand from the published model configs (comments show the sums).
#include "kv/kv_layout.h"

#include <gtest/gtest.h>

namespace frugal::kv {
namespace {

// DeepSeek-R1-Distill-Qwen-7B: 28 layers, 4 kv heads, head_dim 128.
KvGeometry qwen7b(DType dtype) {
  return KvGeometry{.n_layers = 28, .kind = KvKind::kGqa, .n_head_kv = 4, .head_dim_k = 128, .dtype = dtype};
}

// DeepSeek-V3: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64.
KvGeometry deepseek_v3(DType dtype) {
  return KvGeometry{.n_layers = 61, .kind = KvKind::kMla, .latent_dim = 512, .rope_dim = 64, .dtype = dtype};
}

TEST(KvLayout, Qwen7bBf16Is57344BytesPerToken) {
  const KvGeometry g = qwen7b(DType::kBF16);
  ASSERT_TRUE(validate(g).is_ok());
  EXPECT_EQ(bytes_per_token_per_layer(g), 2048);  // (K + V) 2 * 4 heads * 128 * 2 bytes
  EXPECT_EQ(bytes_per_token(g), 57344);           // 2048 * 28
  EXPECT_EQ(bytes_per_block(g), 917504);          // 57344 * 16
}

TEST(KvLayout, DeepseekV3MlaBf16Is70272BytesPerToken) {
  const KvGeometry g = deepseek_v3(DType::kBF16);
  ASSERT_TRUE(validate(g).is_ok());
  EXPECT_EQ(bytes_per_token_per_layer(g), 1152);  // (512 + 64) * 2
  EXPECT_EQ(bytes_per_token(g), 70272);           // 1152 * 61
  EXPECT_EQ(slot_bytes(g, KvTensor::kK), 0);
  EXPECT_EQ(slot_bytes(g, KvTensor::kLatent), 1152);
}

TEST(KvLayout, DtypesAndScales) {
  EXPECT_EQ(bytes_per_token(qwen7b(DType::kF32)), 114688);    // 2*4*128*4 = 4096 per layer * 28
  EXPECT_EQ(bytes_per_token(qwen7b(DType::kF16)), 57344);
  EXPECT_EQ(bytes_per_token(qwen7b(DType::kF8E4M3)), 28672);  // 1024 * 28, per-layer scalar scales
  // int8: 512 (K) + 512 (V) + 16 (K scales: 4 heads * f32) + 16 (V scales) = 1056 per layer.
  EXPECT_EQ(bytes_per_token_per_layer(qwen7b(DType::kI8)), 1056);
  EXPECT_EQ(bytes_per_token(qwen7b(DType::kI8)), 29568);
  // MLA int8: 576 latent bytes + one f32 scale = 580 per layer, * 61.
  EXPECT_EQ(bytes_per_token(deepseek_v3(DType::kI8)), 35380);
  EXPECT_EQ(bytes_per_token(deepseek_v3(DType::kF8E4M3)), 35136);  // 576 * 61
}

TEST(KvLayout, DifferentKAndVHeadDims) {
  KvGeometry g{.n_layers = 1, .n_head_kv = 2, .head_dim_k = 192, .head_dim_v = 128, .dtype = DType::kBF16};
  EXPECT_EQ(slot_bytes(g, KvTensor::kK), 768);  // 2 * 192 * 2
  EXPECT_EQ(slot_bytes(g, KvTensor::kV), 512);  // 2 * 128 * 2
  EXPECT_EQ(bytes_per_token(g), 1280);
}

// 2 layers, 2 kv heads, head_dim 4, block_size 4: a K row is 2*4*2 = 16 bytes.
KvGeometry tiny(DType dtype) {
  return KvGeometry{.n_layers = 2, .n_head_kv = 2, .head_dim_k = 4, .dtype = dtype, .block_size = 4};
}

TEST(KvLayout, ArenaOffsetsBf16) {
  auto a = make_arena_layout(tiny(DType::kBF16), 3);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  // K region: 16 B * 4 slots * 3 blocks = 192 -> padded to 256; V at 256, ends 448 -> 512.
  EXPECT_EQ(a->layer_stride, 512);
  EXPECT_EQ(a->total_bytes, 1024);
  EXPECT_EQ(tensor_offset(*a, 0, KvTensor::kK), 0);
  EXPECT_EQ(tensor_offset(*a, 0, KvTensor::kV), 256);
  EXPECT_EQ(tensor_offset(*a, 1, KvTensor::kK), 512);
  // layer 1, V, block 2, slot 3: 512 + 256 + (2*4 + 3) * 16 = 944.
  EXPECT_EQ(slot_offset(*a, 1, KvTensor::kV, 2, 3), 944);
  EXPECT_EQ(a->tensor_offset[static_cast<int>(KvTensor::kKScale)], -1);
}

TEST(KvLayout, ArenaOffsetsInt8WithScales) {
  auto a = make_arena_layout(tiny(DType::kI8), 3);
  ASSERT_TRUE(a.is_ok());
  // K rows 8 B -> region 96 -> 256; V at 256; K scales (2 heads * 4 B = 8 B rows) at 512; V scales at 768.
  EXPECT_EQ(tensor_offset(*a, 0, KvTensor::kKScale), 512);
  EXPECT_EQ(tensor_offset(*a, 0, KvTensor::kVScale), 768);
  EXPECT_EQ(a->layer_stride, 1024);
  EXPECT_EQ(slot_offset(*a, 0, KvTensor::kVScale, 1, 2), 816);  // 768 + (4 + 2) * 8
  EXPECT_EQ(slot_offset(*a, 1, KvTensor::kK, 0, 1), 1032);      // 1024 + 1 * 8
}

TEST(KvLayout, MlaArena) {
  KvGeometry g{.n_layers = 3, .kind = KvKind::kMla, .latent_dim = 8, .rope_dim = 4, .dtype = DType::kF32,
               .block_size = 2};
  auto a = make_arena_layout(g, 5);
  ASSERT_TRUE(a.is_ok());
  // Latent row 12 * 4 = 48 B; region 48 * 2 * 5 = 480 -> 512 per layer.
  EXPECT_EQ(a->layer_stride, 512);
  EXPECT_EQ(slot_offset(*a, 2, KvTensor::kLatent, 4, 1), 1024 + 9 * 48);
}

TEST(KvLayout, BlocksForBudgetCountsPadding) {
  // 10 GiB for the 7B bf16 cache: 10737418240 / 917504 = 11702.86; regions are multiples of 256.
  EXPECT_EQ(n_blocks_for_budget(qwen7b(DType::kBF16), int64_t{10} << 30), 11702);
  // tiny bf16: a block is 256 bytes unpadded; 4 blocks fill exactly 1024 (K 256 + V 256, 2 layers).
  EXPECT_EQ(n_blocks_for_budget(tiny(DType::kBF16), 1024), 4);
  // 1023 bytes: 3, 2 and 1 blocks all pad to 1024, so nothing fits.
  EXPECT_EQ(n_blocks_for_budget(tiny(DType::kBF16), 1023), 0);
  EXPECT_EQ(n_blocks_for_budget(tiny(DType::kBF16), 0), 0);
  EXPECT_EQ(arena_bytes(tiny(DType::kBF16), 5), 2048);  // K 320 -> 512, V -> 1024, * 2 layers
}

TEST(KvLayout, ValidationNamesTheField) {
  KvGeometry g = qwen7b(DType::kBF16);
  g.n_head_kv = 0;
  Status s = validate(g);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("n_head_kv"), std::string::npos);

  g = qwen7b(DType::kI4);
  EXPECT_EQ(validate(g).code(), ErrorCode::kUnsupported);

  g = deepseek_v3(DType::kBF16);
  g.latent_dim = 0;
  EXPECT_NE(validate(g).message().find("latent_dim"), std::string::npos);
  EXPECT_FALSE(make_arena_layout(qwen7b(DType::kBF16), 0).is_ok());
}

}  // namespace
}  // namespace frugal::kv
