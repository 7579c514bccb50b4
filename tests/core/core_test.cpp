#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>
#include <cmath>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace frugal {
namespace {

TEST(Status, ErrorCarriesMessageAndContext) {
  Status s = corrupt("header length 99 past end").with_context("model.safetensors");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), ErrorCode::kCorrupt);
  EXPECT_EQ(s.message(), "model.safetensors: header length 99 past end");
}

Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("expected a positive value, got " + std::to_string(v));
  return v;
}

Status use(int v, int* out) {
  FRUGAL_ASSIGN_OR_RETURN(*out, parse_positive(v));
  return Status::ok();
}

TEST(Result, PropagatesErrors) {
  int out = 0;
  EXPECT_TRUE(use(3, &out).is_ok());
  EXPECT_EQ(out, 3);
  Status s = use(-1, &out);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
}

// Oracle values: IEEE bit patterns from the bf16/f16 specifications.
TEST(DType, Bf16RoundTripAndRounding) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(DType, F16Conversions) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(DType, F8E4M3) {
  EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(f32_to_f8e4m3(1.0f), 0x38);
  EXPECT_EQ(f32_to_f8e4m3(1000.0f), 0x7e);
}

// HostBuffer: 64-byte aligned; from 64 MB on, 2 MB aligned (the transparent huge page size it
// asks Linux for), and every byte writable up to the size asked.
TEST(HostBuffer, AlignmentBySize) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{100}, size_t{(64u << 20) - 1}, size_t{64u << 20}, size_t{(64u << 20) + 7}}) {
    HostBuffer b(n);
    ASSERT_NE(b.data(), nullptr) << n;
    EXPECT_EQ(b.size(), n);
    const auto addr = reinterpret_cast<uintptr_t>(b.data());
    EXPECT_EQ(addr % 64, 0u) << n;
    if (n >= (size_t{64} << 20)) {
      EXPECT_EQ(addr % (size_t{2} << 20), 0u) << n;
    }
    if (n > 0) {
      std::memset(b.data(), 0xab, n);
      EXPECT_EQ(b.as<uint8_t>()[n - 1], 0xab);
    }
  }
  // A size whose rounding would wrap is refused, not turned into a tiny buffer.
  EXPECT_THROW(HostBuffer(SIZE_MAX - 5), std::bad_alloc);
}

TEST(ThreadPool, ParallelForCoversRangeOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(1001);
  for (int rep = 0; rep < 50; ++rep) {
    pool.parallel_for(1001, 7, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
  }
  for (auto& h : hits) EXPECT_EQ(h.load(), 50);
}

TEST(ThreadPool, ConcurrentCallersAreSerialized) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(4000);
  auto work = [&](int64_t offset) {
    for (int rep = 0; rep < 200; ++rep)
      pool.parallel_for(1000, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(offset + i)]++;
      });
  };
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) callers.emplace_back(work, c * 1000);
  for (auto& t : callers) t.join();
  for (auto& h : hits) EXPECT_EQ(h.load(), 200);
}

}  // namespace
}  // namespace frugal
