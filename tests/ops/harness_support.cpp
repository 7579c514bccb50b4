// The expected-support table of every backend the harness runs (see SupportTable in harness.h).
// A backend runs every harness case unless a refusal is listed here with the reason; issue 16's
// formats add rows such as {kMatmul, "w=int4 ...", "no CUDA kernel yet"} while a kernel is missing.
#include "harness.h"

namespace frugal::testing {

bool SupportTable::expects(ops::OpKind op, const std::string& variant) const {
  for (const auto& r : refusals_)
    if (r.op == op && r.variant == variant) return false;
  return true;
}

const SupportTable* support_table_for(const std::string& name) {
  // The oracle and the CPU backend (every ISA) run every case. The CUDA backend refuses the
  // quantized KV caches (fp8 e4m3, int8: issue 20) with an error naming the dtype until its
  // KV-write and attention kernels read them.
  static const SupportTable kRef, kCpu;
  static const SupportTable kCuda({
      {ops::OpKind::kKvWrite, std::string("cache=") + dtype_name(DType::kF8E4M3), "no CUDA fp8 KV cache kernels yet"},
      {ops::OpKind::kKvWrite, std::string("cache=") + dtype_name(DType::kI8), "no CUDA int8 KV cache kernels yet"},
      {ops::OpKind::kAttention, std::string("cache=") + dtype_name(DType::kF8E4M3), "no CUDA fp8 KV cache kernels yet"},
      {ops::OpKind::kAttention, std::string("cache=") + dtype_name(DType::kI8), "no CUDA int8 KV cache kernels yet"},
      // Attention sinks (--kv-sinks) have no CUDA kernel path yet, whatever the cache dtype.
      {ops::OpKind::kAttention, std::string("cache=") + dtype_name(DType::kF32) + " sinks", "no CUDA attention sinks yet"},
      {ops::OpKind::kAttention, std::string("cache=") + dtype_name(DType::kBF16) + " sinks", "no CUDA attention sinks yet"},
      {ops::OpKind::kAttention, std::string("cache=") + dtype_name(DType::kF8E4M3) + " sinks", "no CUDA attention sinks yet"},
      {ops::OpKind::kAttention, std::string("cache=") + dtype_name(DType::kI8) + " sinks", "no CUDA attention sinks yet"},
  });
  if (name == "ref") return &kRef;
  if (name == "cpu") return &kCpu;
  if (name == "cuda") return &kCuda;
  return nullptr;
}

}  // namespace frugal::testing
