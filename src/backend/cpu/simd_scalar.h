// Scalar "vector" traits (width 1): the portable fallback and the FRUGAL_ISA=scalar test path.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace frugal::cpu::scalar {

struct Vec {
  using F = float;
  static constexpr int kWidth = 1;

  static F zero() { return 0.0f; }
  static F set1(float v) { return v; }
  static F load(const float* p) { return *p; }
  static F load_bf16(const uint16_t* p) {
    uint32_t u = static_cast<uint32_t>(*p) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static F load_f16(const uint16_t* p);
  static void store(float* p, F v) { *p = v; }
  static void store_bf16(uint16_t* p, F v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      *p = static_cast<uint16_t>((u >> 16) | 0x40);
      return;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    *p = static_cast<uint16_t>(u >> 16);
  }
  static F add(F a, F b) { return a + b; }
  static F sub(F a, F b) { return a - b; }
  static F mul(F a, F b) { return a * b; }
  static F div(F a, F b) { return a / b; }
  static F max(F a, F b) { return a > b ? a : b; }
  static F min(F a, F b) { return a < b ? a : b; }
  static F fma(F a, F b, F c) { return a * b + c; }
  static F fnma(F a, F b, F c) { return c - a * b; }
  static float reduce_add(F v) { return v; }
  static float reduce_max(F v) { return v; }
  static F round(F v) { return std::nearbyint(v); }
  static void transpose(F*) {}  // 1x1
  static F pow2i(F n) { return std::ldexp(1.0f, static_cast<int>(n)); }
};

}  // namespace frugal::cpu::scalar

namespace frugal::cpu::scalar {

inline float Vec::load_f16(const uint16_t* p) {
  const uint32_t h = *p;
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | mant << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace frugal::cpu::scalar
