// Run-time CPU feature detection for choosing vectorized kernels.
#pragma once

namespace frugal {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_bf16 = false;
  bool avx512_vnni = false;
};

const CpuFeatures& cpu_features();
// "avx512_bf16" / "avx512" / "avx2" / "scalar": the best level the kernels will use.
const char* cpu_isa_level();

}  // namespace frugal
