// Helpers for the CUDA op tests: host tensors in any float dtype, device copies with guard
// bytes behind them (checked after every op), NaN-filled outputs (an element the kernel never
// writes stays NaN and fails), and tolerance checks against ops::ref run on the same bytes.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/dtype.h"
#include "ops/reference.h"

namespace frugal::cuda::testing {

constexpr size_t kGuardBytes = 256;
constexpr uint8_t kGuardByte = 0xA5;

inline CudaBackend* backend() {
  static std::unique_ptr<CudaBackend> b = [] {
    auto r = CudaBackend::create(0);
    if (!r.is_ok()) {
      std::fprintf(stderr, "no CUDA device: %s\n", r.status().to_string().c_str());
      std::abort();
    }
    return std::move(r).value();
  }();
  return b.get();
}

// A host tensor of n elements of dtype t plus its device twin (with guard bytes).
struct Tensor {
  DType dtype = DType::kBF16;
  int64_t n = 0;
  std::vector<uint8_t> host;
  void* dev = nullptr;

  Tensor() = default;
  Tensor(DType t, int64_t count) : dtype(t), n(count), host(static_cast<size_t>(dtype_bytes(t, count))) {
    auto r = backend()->alloc(bytes() + kGuardBytes);
    EXPECT_TRUE(r.is_ok());
    dev = r.value();
    std::vector<uint8_t> guard(kGuardBytes, kGuardByte);
    EXPECT_TRUE(backend()->upload(static_cast<uint8_t*>(dev) + bytes(), guard.data(), kGuardBytes).is_ok());
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  ~Tensor() { backend()->free(dev); }

  size_t bytes() const { return host.size(); }
  float get(int64_t i) const { return ops::ref::load(dtype, host.data(), i); }
  void set(int64_t i, float v) { ops::ref::store(dtype, host.data(), i, v); }
  void fill_uniform(std::mt19937& rng, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    for (int64_t i = 0; i < n; ++i) set(i, d(rng));
  }
  void fill_nan() { std::memset(host.data(), 0xFF, host.size()); }
  void to_device() { EXPECT_TRUE(backend()->upload(dev, host.data(), bytes()).is_ok()); }
  // Downloads into `out` (host copy) and checks the guard bytes.
  void from_device(std::vector<uint8_t>* out, const std::string& what) const {
    std::vector<uint8_t> all(bytes() + kGuardBytes);
    ASSERT_TRUE(backend()->download(all.data(), dev, all.size()).is_ok());
    for (size_t i = 0; i < kGuardBytes; ++i)
      ASSERT_EQ(all[bytes() + i], kGuardByte) << what << ": guard byte " << i << " overwritten";
    out->assign(all.begin(), all.begin() + static_cast<int64_t>(bytes()));
  }
};

inline void* dev_ints(const std::vector<int32_t>& v, std::vector<void*>* keep) {
  void* p = backend()->alloc(v.size() * 4 + 4).value();
  EXPECT_TRUE(backend()->upload(p, v.data(), v.size() * 4).is_ok());
  keep->push_back(p);
  return p;
}

struct DevInts {
  std::vector<void*> ptrs;
  ~DevInts() {
    for (void* p : ptrs) backend()->free(p);
  }
  int32_t* operator()(const std::vector<int32_t>& v) { return static_cast<int32_t*>(dev_ints(v, &ptrs)); }
  float* floats(const std::vector<float>& v) {
    void* p = backend()->alloc(v.size() * 4 + 4).value();
    EXPECT_TRUE(backend()->upload(p, v.data(), v.size() * 4).is_ok());
    ptrs.push_back(p);
    return static_cast<float*>(p);
  }
};

// Compares the device result of `t` (elements [0, n) selected by `mask`, all if empty) with
// the reference bytes `want`: |got - want| <= tol * max(|want|, rms(want)), no NaN anywhere.
// The same on host bytes `got` (n elements of `dtype`) already downloaded.
inline void expect_close_host(DType dtype, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, int64_t n,
                              float tol, const std::string& what, const std::vector<bool>& mask = {}) {
  double ss = 0;
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!mask.empty() && !mask[static_cast<size_t>(i)]) continue;
    double w = ops::ref::load(dtype, want.data(), i);
    ss += w * w;
    ++counted;
  }
  const double rms = counted ? std::sqrt(ss / static_cast<double>(counted)) : 0.0;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!mask.empty() && !mask[static_cast<size_t>(i)]) continue;
    float g = ops::ref::load(dtype, got.data(), i), w = ops::ref::load(dtype, want.data(), i);
    bool ok = std::isfinite(g) && std::fabs(g - w) <= tol * std::max<double>(std::fabs(w), rms) + 1e-6;
    if (!ok && bad++ < 5) ADD_FAILURE() << what << ": element " << i << " got " << g << " want " << w << " (rms " << rms << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << counted << " elements off";
}

inline void expect_close(const Tensor& t, const std::vector<uint8_t>& want, float tol, const std::string& what,
                         const std::vector<bool>& mask = {}) {
  std::vector<uint8_t> got;
  t.from_device(&got, what);
  expect_close_host(t.dtype, got, want, t.n, tol, what, mask);
}

inline float tol_for(DType t) { return t == DType::kF32 ? 2e-4f : 2e-2f; }

}  // namespace frugal::cuda::testing
