#include "core/cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace frugal {

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures c;
#if defined(__x86_64__)
    __builtin_cpu_init();
    c.avx2 = __builtin_cpu_supports("avx2");
    c.fma = __builtin_cpu_supports("fma");
    c.avx512f = __builtin_cpu_supports("avx512f");
    c.avx512bw = __builtin_cpu_supports("avx512bw");
    c.avx512vl = __builtin_cpu_supports("avx512vl");
    c.avx512_vnni = __builtin_cpu_supports("avx512vnni");
    c.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
    unsigned a, b, cc, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(cc), "=d"(d) : "a"(1), "c"(0));
    c.f16c = (cc >> 29) & 1u;
#endif
    // FRUGAL_ISA=avx2|scalar caps the level (for tests of every code path).
    if (const char* cap = std::getenv("FRUGAL_ISA")) {
      if (std::strcmp(cap, "avx2") == 0) {
        c.avx512f = c.avx512bw = c.avx512vl = c.avx512_bf16 = c.avx512_vnni = false;
      } else if (std::strcmp(cap, "scalar") == 0) {
        c = CpuFeatures{};
      }
    }
    return c;
  }();
  return f;
}

const char* cpu_isa_level() {
  const auto& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512_bf16) return "avx512_bf16";
  if (f.avx512f && f.avx512bw) return "avx512";
  if (f.avx2 && f.fma && f.f16c) return "avx2";
  return "scalar";
}

}  // namespace frugal
