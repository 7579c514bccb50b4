// safetensors reader: valid files (single, sharded, every float dtype and I64) and each kind
// of corruption, with errors that name the file and the tensor.
#include <cstring>

#include <gtest/gtest.h>

#include "model/safetensors.h"
#include "model_test_util.h"

namespace frugal::model {
namespace {

using frugal::testing::temp_dir;
using frugal::testing::write_text;

// Writes 8-byte length + header + data; `len` overrides the length field.
void write_raw(const std::string& path, const std::string& header, size_t data_bytes, int64_t len = -1) {
  std::string s(8, '\0');
  uint64_t n = len < 0 ? header.size() : static_cast<uint64_t>(len);
  std::memcpy(s.data(), &n, 8);
  s += header;
  s += std::string(data_bytes, '\x01');
  write_text(path, s);
}

std::string error_of(const std::string& path) {
  auto r = SafetensorsSet::open_file(path);
  EXPECT_FALSE(r.is_ok()) << path;
  return r.is_ok() ? "" : r.status().message();
}

TEST(Safetensors, RoundTripsEveryDtype) {
  const std::string dir = temp_dir("st_roundtrip");
  const float f[6] = {1, -2, 3.5f, 0, 5, 6};
  const uint16_t h[2] = {f32_to_bf16(1.5f), f32_to_bf16(-3.0f)};
  const uint16_t g[2] = {f32_to_f16(0.25f), f32_to_f16(8.0f)};
  const int64_t ids[3] = {7, -1, 1234567890123};
  ASSERT_TRUE(write_safetensors(dir + "/a.safetensors", {
      {"f", DType::kF32, {2, 3}, f}, {"b", DType::kBF16, {2}, h}, {"h", DType::kF16, {2}, g},
      {"ids", DType::kI64, {3}, ids}}).is_ok());
  auto set = SafetensorsSet::open_file(dir + "/a.safetensors");
  ASSERT_TRUE(set.is_ok()) << set.status().to_string();
  ASSERT_EQ((*set)->size(), 4u);
  const TensorEntry* t = (*set)->find("f");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kF32);
  EXPECT_EQ(t->shape, (Shape{2, 3}));
  EXPECT_EQ(std::memcmp(t->data, f, sizeof(f)), 0);
  EXPECT_EQ(bf16_to_f32(reinterpret_cast<const uint16_t*>((*set)->find("b")->data)[1]), -3.0f);
  EXPECT_EQ(f16_to_f32(reinterpret_cast<const uint16_t*>((*set)->find("h")->data)[0]), 0.25f);
  EXPECT_EQ(reinterpret_cast<const int64_t*>((*set)->find("ids")->data)[2], 1234567890123);
  EXPECT_EQ((*set)->find("missing"), nullptr);
}

TEST(Safetensors, TooShortFile) {
  const std::string p = temp_dir("st_short") + "/x.safetensors";
  write_text(p, "abc");
  EXPECT_NE(error_of(p).find(p), std::string::npos);
}

TEST(Safetensors, HeaderLengthPastEnd) {
  const std::string p = temp_dir("st_hdrlen") + "/x.safetensors";
  write_raw(p, "{}", 0, 1000);
  const std::string e = error_of(p);
  EXPECT_NE(e.find(p), std::string::npos);
  EXPECT_NE(e.find("past the end"), std::string::npos) << e;
}

TEST(Safetensors, AbsurdHeaderLength) {
  const std::string p = temp_dir("st_absurd") + "/x.safetensors";
  write_raw(p, "{}", 0, int64_t{1} << 40);
  EXPECT_NE(error_of(p).find("absurd"), std::string::npos);
}

TEST(Safetensors, BadJson) {
  const std::string p = temp_dir("st_json") + "/x.safetensors";
  write_raw(p, "{\"a\": {\"dtype\": ", 0);
  const std::string e = error_of(p);
  EXPECT_NE(e.find(p), std::string::npos);
  EXPECT_NE(e.find("JSON"), std::string::npos) << e;
}

TEST(Safetensors, MissingField) {
  const std::string p = temp_dir("st_field") + "/x.safetensors";
  write_raw(p, R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4);
  const std::string e = error_of(p);
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("shape"), std::string::npos) << e;
}

TEST(Safetensors, OffsetsPastEnd) {
  const std::string p = temp_dir("st_off") + "/x.safetensors";
  write_raw(p, R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8);
  const std::string e = error_of(p);
  EXPECT_NE(e.find(p), std::string::npos);
  EXPECT_NE(e.find("'w'"), std::string::npos);
  EXPECT_NE(e.find("past the end"), std::string::npos) << e;
}

TEST(Safetensors, SizeNotMatchingShape) {
  const std::string p = temp_dir("st_size") + "/x.safetensors";
  write_raw(p, R"({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}})", 8);
  const std::string e = error_of(p);
  EXPECT_NE(e.find("'w'"), std::string::npos);
  EXPECT_NE(e.find("needs 6"), std::string::npos) << e;
}

TEST(Safetensors, OverlappingTensors) {
  const std::string p = temp_dir("st_overlap") + "/x.safetensors";
  write_raw(p, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                   "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12);
  const std::string e = error_of(p);
  EXPECT_NE(e.find("overlaps"), std::string::npos) << e;
  EXPECT_NE(e.find("'a'"), std::string::npos);
  EXPECT_NE(e.find("'b'"), std::string::npos);
}

TEST(Safetensors, UnsupportedDtypeNamesTensorAndDtype) {
  const std::string p = temp_dir("st_dtype") + "/x.safetensors";
  write_raw(p, R"({"w": {"dtype": "F8_E5M2", "shape": [2], "data_offsets": [0, 2]}})", 2);
  auto r = SafetensorsSet::open_file(p);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(r.status().message().find("'w'"), std::string::npos);
  EXPECT_NE(r.status().message().find("F8_E5M2"), std::string::npos);
}

TEST(Safetensors, ShardedDirectory) {
  const std::string dir = temp_dir("st_shards");
  const float a[2] = {1, 2}, b[3] = {3, 4, 5};
  ASSERT_TRUE(write_safetensors(dir + "/model-00001-of-00002.safetensors", {{"a", DType::kF32, {2}, a}}).is_ok());
  ASSERT_TRUE(write_safetensors(dir + "/model-00002-of-00002.safetensors", {{"b", DType::kF32, {3}, b}}).is_ok());
  write_text(dir + "/model.safetensors.index.json",
             R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
  auto set = SafetensorsSet::open_dir(dir);
  ASSERT_TRUE(set.is_ok()) << set.status().to_string();
  EXPECT_EQ((*set)->names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(reinterpret_cast<const float*>((*set)->find("b")->data)[2], 5.0f);
}

TEST(Safetensors, IndexNamesMissingShard) {
  const std::string dir = temp_dir("st_noshard");
  write_text(dir + "/model.safetensors.index.json", R"({"weight_map": {"a": "model-00001-of-00002.safetensors"}})");
  auto r = SafetensorsSet::open_dir(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("model.safetensors.index.json"), std::string::npos);
  EXPECT_NE(r.status().message().find("model-00001-of-00002.safetensors"), std::string::npos);
  EXPECT_NE(r.status().message().find("'a'"), std::string::npos);
}

TEST(Safetensors, IndexNamesTensorMissingFromShard) {
  const std::string dir = temp_dir("st_notensor");
  const float a[2] = {1, 2};
  ASSERT_TRUE(write_safetensors(dir + "/s1.safetensors", {{"a", DType::kF32, {2}, a}}).is_ok());
  write_text(dir + "/model.safetensors.index.json", R"({"weight_map": {"a": "s1.safetensors", "zz": "s1.safetensors"}})");
  auto r = SafetensorsSet::open_dir(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'zz'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("s1.safetensors"), std::string::npos);
}

TEST(Safetensors, EmptyDirectory) {
  const std::string dir = temp_dir("st_empty");
  auto r = SafetensorsSet::open_dir(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find(dir), std::string::npos);
}

}  // namespace
}  // namespace frugal::model
