// Element types and scalar conversions (host side).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace frugal {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,
  kI8,
  kI4,  // packed two per byte, low nibble first
  kI32,
  kI64,
  kU8,
  kBool,
  kF64,
};

// Bytes for n elements (rounds packed int4 up to whole bytes).
int64_t dtype_bytes(DType t, int64_t n);
// Size of one element in bits.
int dtype_bits(DType t);
const char* dtype_name(DType t);
// Parses safetensors dtype strings ("BF16", "F16", "F32", "F8_E4M3", "I8", ...).
bool dtype_from_safetensors(std::string_view s, DType* out);
const char* dtype_safetensors_name(DType t);

// bf16: upper 16 bits of an IEEE float; round-to-nearest-even on conversion.
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float f8e4m3_to_f32(uint8_t v);
uint8_t f32_to_f8e4m3(float f);

// Converts n elements of `src` (dtype t) to f32.
void convert_to_f32(DType t, const void* src, float* dst, int64_t n);

}  // namespace frugal
