// Buffers, random inputs and comparisons for the op harness.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "backends.h"
#include "harness.h"
#include "ops/reference.h"

namespace frugal::testing {

HostMat::HostMat(DType t, int64_t r, int64_t c, int64_t l) : dtype(t), rows(r), cols(c), ld(l) {
  bytes.assign(static_cast<size_t>(dtype_bytes(t, r * l)), 0);
}

float HostMat::get(int64_t r, int64_t c) const { return ops::ref::load(dtype, bytes.data(), r * ld + c); }
void HostMat::set(int64_t r, int64_t c, float v) { ops::ref::store(dtype, bytes.data(), r * ld + c, v); }

void HostMat::fill_random(std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ld; ++c) set(r, c, c < cols ? dist(rng) : NAN);
}

GuardedBuffer::GuardedBuffer(ops::Backend* backend, const void* host, size_t nbytes)
    : backend_(backend), nbytes_(nbytes) {
  auto buf = ops::DeviceBuffer::create(backend, nbytes + 2 * kGuardBytes);
  FRUGAL_CHECK_MSG(buf.is_ok(), buf.status().to_string());
  buf_ = std::move(buf).value();
  std::vector<uint8_t> image(nbytes + 2 * kGuardBytes);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<uint8_t>(0xA5 ^ (i * 7));
  if (nbytes) std::memcpy(image.data() + kGuardBytes, host, nbytes);
  Status st = backend->upload(buf_.data(), image.data(), image.size());
  FRUGAL_CHECK_MSG(st.is_ok(), st.to_string());
}

std::vector<uint8_t> GuardedBuffer::download() const {
  std::vector<uint8_t> out(nbytes_);
  Status st = backend_->synchronize();
  FRUGAL_CHECK_MSG(st.is_ok(), st.to_string());
  if (nbytes_) st = backend_->download(out.data(), ptr(), nbytes_);
  FRUGAL_CHECK_MSG(st.is_ok(), st.to_string());
  return out;
}

::testing::AssertionResult GuardedBuffer::check_guards(const std::string& what) const {
  std::vector<uint8_t> image(nbytes_ + 2 * kGuardBytes);
  Status st = backend_->download(image.data(), buf_.data(), image.size());
  if (!st.is_ok()) return ::testing::AssertionFailure() << what << ": download failed: " << st.to_string();
  for (size_t i = 0; i < image.size(); ++i) {
    if (i == kGuardBytes) i += nbytes_;
    if (i >= image.size()) break;
    if (image[i] != static_cast<uint8_t>(0xA5 ^ (i * 7)))
      return ::testing::AssertionFailure() << what << ": guard byte " << (i < kGuardBytes ? "before" : "after")
                                           << " the buffer overwritten at offset "
                                           << static_cast<int64_t>(i) - static_cast<int64_t>(kGuardBytes);
  }
  return ::testing::AssertionSuccess();
}

namespace {

double rms_of(const HostMat& m) {
  double ss = 0;
  int64_t n = 0;
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < m.cols; ++c) {
      double v = m.get(r, c);
      if (std::isfinite(v)) ss += v * v, ++n;
    }
  return n ? std::sqrt(ss / static_cast<double>(n)) : 0.0;
}

}  // namespace

::testing::AssertionResult compare_mats(const HostMat& got, const HostMat& want, const HostMat& gaps,
                                        double tol, const std::string& what) {
  const double scale = rms_of(want) + 1e-30;
  const size_t esize = static_cast<size_t>(dtype_bytes(got.dtype, 1));
  double worst = 0;
  std::ostringstream worst_at;
  for (int64_t r = 0; r < want.rows; ++r) {
    for (int64_t c = 0; c < want.ld; ++c) {
      const size_t off = static_cast<size_t>(r * want.ld + c) * esize;
      if (c >= want.cols) {
        if (std::memcmp(got.bytes.data() + off, gaps.bytes.data() + off, esize) != 0)
          return ::testing::AssertionFailure() << what << ": row gap written at [" << r << ", " << c << "]";
        continue;
      }
      const double g = got.get(r, c), w = want.get(r, c);
      if (std::isfinite(w) && !std::isfinite(g))
        return ::testing::AssertionFailure() << what << ": non-finite " << g << " at [" << r << ", " << c
                                             << "], expected " << w;
      const double err = std::fabs(g - w) / (std::fabs(w) + scale);
      if (err > worst) {
        worst = err;
        worst_at.str("");
        worst_at << "[" << r << ", " << c << "] got " << g << " expected " << w;
      }
    }
  }
  if (worst > tol)
    return ::testing::AssertionFailure() << what << ": relative error " << worst << " > " << tol << " at "
                                         << worst_at.str();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult compare_flat(DType t, const void* got, const void* want, int64_t n, double tol,
                                        const std::string& what) {
  HostMat g(t, 1, n, n), w(t, 1, n, n);
  std::memcpy(g.data(), got, g.bytes.size());
  std::memcpy(w.data(), want, w.bytes.size());
  return compare_mats(g, w, w, tol, what);
}

void expect_within_fp8_act_bound(const HostMat& got, const HostMat& want, const HostMat& gaps, const HostMat& x,
                                 const std::vector<float>& w, double act_tol, const std::string& what) {
  EXPECT_TRUE(compare_mats(got, want, gaps, 1e30, what));  // gaps untouched, values finite
  const int64_t m = want.rows, n = want.cols, k = x.cols;
  for (int64_t i = 0; i < m; ++i) {
    double amax = 0;
    for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(static_cast<double>(x.get(i, j))));
    for (int64_t o = 0; o < n; ++o) {
      double bound = 0;
      for (int64_t j = 0; j < k; ++j)
        bound += std::fabs(w[static_cast<size_t>(o * k + j)]) * (std::fabs(static_cast<double>(x.get(i, j))) / 16 + amax / 448 / 1024);
      bound = bound * 1.001 + act_tol * (1 + std::fabs(want.get(i, o)));
      EXPECT_LE(std::fabs(got.get(i, o) - want.get(i, o)), bound) << what << " at [" << i << ", " << o << "]";
    }
  }
}

void OpHarness::SetUp() {
  auto b = make_backend_by_name(GetParam());
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  backend_ = std::move(b).value();
  const SupportTable* table = support_table_for(GetParam());
  ASSERT_NE(table, nullptr) << "backend '" << GetParam() << "' has no support table in tests/ops/harness_support.cpp";
  cases_ = std::make_unique<OpCases>(backend_.get(), table);
}

std::unique_ptr<GuardedBuffer> OpCases::upload(const void* host, size_t nbytes) {
  return std::make_unique<GuardedBuffer>(backend_, host, nbytes);
}

HostMat OpCases::download(const GuardedBuffer& b, const HostMat& like) {
  HostMat out = like;
  out.bytes = b.download();
  return out;
}

bool OpCases::ran(const Status& st, ops::OpKind op, const std::string& variant, const std::string& what) {
  const bool expected = support_->expects(op, variant);
  const std::string where = std::string(ops::op_kind_name(op)) + (variant.empty() ? "" : " [" + variant + "]");
  if (st.is_ok()) {
    ++n_ran_;
    if (!expected)
      ADD_FAILURE() << what << ": backend '" << backend_->name() << "' ran " << where
                    << ", which its support table (tests/ops/harness_support.cpp) says it refuses: update the table";
    return true;
  }
  if (st.code() == ErrorCode::kUnsupported) {
    if (expected) {
      ADD_FAILURE() << what << ": backend '" << backend_->name() << "' refused a case its support table expects it to run ("
                    << where << "): " << st.to_string();
    } else {
      ++n_refused_;
    }
    return false;
  }
  ADD_FAILURE() << what << ": " << st.to_string();
  return false;
}

}  // namespace frugal::testing
