#include "core/dtype.h"

#include <cmath>

namespace frugal {

int dtype_bits(DType t) {
  switch (t) {
    case DType::kF32: return 32;
    case DType::kF16: return 16;
    case DType::kBF16: return 16;
    case DType::kF8E4M3: return 8;
    case DType::kI8: return 8;
    case DType::kI4: return 4;
    case DType::kI32: return 32;
    case DType::kI64: return 64;
    case DType::kU8: return 8;
    case DType::kBool: return 8;
    case DType::kF64: return 64;
  }
  return 0;
}

int64_t dtype_bytes(DType t, int64_t n) { return (n * dtype_bits(t) + 7) / 8; }

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF8E4M3: return "f8_e4m3";
    case DType::kI8: return "i8";
    case DType::kI4: return "i4";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
    case DType::kBool: return "bool";
    case DType::kF64: return "f64";
  }
  return "?";
}

const char* dtype_safetensors_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kI8: return "I8";
    case DType::kI4: return "I4";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kU8: return "U8";
    case DType::kBool: return "BOOL";
    case DType::kF64: return "F64";
  }
  return "?";
}

bool dtype_from_safetensors(std::string_view s, DType* out) {
  struct Entry { std::string_view name; DType t; };
  static constexpr Entry kTable[] = {
      {"F32", DType::kF32}, {"F16", DType::kF16}, {"BF16", DType::kBF16},
      {"F8_E4M3", DType::kF8E4M3}, {"I8", DType::kI8}, {"I32", DType::kI32},
      {"I64", DType::kI64}, {"U8", DType::kU8}, {"BOOL", DType::kBool}, {"F64", DType::kF64},
  };
  for (const auto& e : kTable) {
    if (e.name == s) { *out = e.t; return true; }
  }
  return false;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
      mant &= 0x3ffu;
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | mant << 13;
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

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (a < 0x38800000u) {  // subnormal or zero in f16
    float af;
    std::memcpy(&af, &a, 4);
    // 2^-24 is the smallest f16 subnormal; round to nearest even via float arithmetic.
    float scaled = af * 16777216.0f;  // / 2^-24
    uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t exp = ((a >> 23) - 127 + 15);
  uint32_t mant = a & 0x7fffffu;
  uint32_t h = exp << 10 | mant >> 13;
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float f8e4m3_to_f32(uint8_t v) {
  uint32_t sign = (v & 0x80u) ? 1u : 0u;
  uint32_t exp = (v >> 3) & 0xfu;
  uint32_t mant = v & 0x7u;
  float r;
  if (exp == 0xf && mant == 0x7) return NAN;
  if (exp == 0) r = std::ldexp(static_cast<float>(mant), -9);  // subnormal: m/8 * 2^-6
  else r = std::ldexp(1.0f + mant / 8.0f, static_cast<int>(exp) - 7);
  return sign ? -r : r;
}

uint8_t f32_to_f8e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;  // saturate to max finite
  // Find the nearest representable value by scanning the 127 magnitudes (rarely on hot paths).
  uint8_t best = 0;
  float best_err = INFINITY;
  for (uint8_t m = 0; m < 0x7f; ++m) {
    float err = std::fabs(f8e4m3_to_f32(m) - a);
    if (err < best_err || (err == best_err && (m & 1) == 0)) { best = m; best_err = err; }
  }
  return sign | best;
}

void convert_to_f32(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::kF8E4M3: {
      const auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f8e4m3_to_f32(s[i]);
      return;
    }
    case DType::kI8: {
      const auto* s = static_cast<const int8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case DType::kF64: {
      const auto* s = static_cast<const double*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
    case DType::kI4:
    case DType::kI32:
    case DType::kI64:
    case DType::kU8:
    case DType::kBool:
      break;
  }

  for (int64_t i = 0; i < n; ++i) dst[i] = NAN;
}

}  // namespace frugal
