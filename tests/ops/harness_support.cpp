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
  // The oracle, the CPU backend (every ISA) and the CUDA backend (also as cuda_fused: every fused
  // kernel switched on, cuda_slab: the slab quantized GEMM, cuda_bulk and cuda_tile: the bulk and
  // the tile quantized GEMVs, the default being the lean one) run every other case: CUDA's
  // KV-write and attention kernels read fp8 e4m3 and int8 caches and attention sinks (issue 20).
  // Every backend's grouped experts take an expert-parallel rank's subset ("expert subset").
  // The CPU backend's activations are f32: it refuses batched matmuls over bf16 / f16 x.
  static const SupportTable kRef, kCuda;
  static const SupportTable kCpu(std::vector<SupportTable::Refusal>{
      {ops::OpKind::kBatchedMatmul, "x=bf16", "cpu activations are f32"},
      {ops::OpKind::kBatchedMatmul, "x=f16", "cpu activations are f32"}});
  if (name == "ref") return &kRef;
  if (name == "cpu") return &kCpu;
  if (name == "cuda" || name == "cuda_fused" || name == "cuda_slab" || name == "cuda_bulk" ||
      name == "cuda_tile")
    return &kCuda;
  return nullptr;
}

}  // namespace frugal::testing
