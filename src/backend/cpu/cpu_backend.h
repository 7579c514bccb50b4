// The CPU backend: every op of ops::Backend on host memory, fp32 compute, vectorized with
// AVX-512 or AVX2+FMA+F16C (chosen at run time, capped by FRUGAL_ISA=avx2|scalar) and
// parallel over the given thread pool. Weights may be f32, bf16 or f16 and are read in place
// (converted in registers); activations are f32; the KV cache is f32 or bf16.
// Not reentrant: one thread issues ops at a time (the pool's parallel_for is not reentrant).
#pragma once

#include <memory>

#include "core/thread_pool.h"
#include "ops/backend.h"

namespace frugal {

struct CpuBackendOptions {
  // INT8 / INT4 matmuls round x to int8 per 32 inputs for integer dot products where the CPU has
  // them (decode on AVX-512 VNNI, prefill on AVX-512 VNNI and AVX2; docs/quantization.md). True
  // keeps x in f32 everywhere: exact up to f32 rounding, for format-correctness tests.
  bool exact_quant_activations = false;
};

std::unique_ptr<ops::Backend> make_cpu_backend(ThreadPool* pool = &ThreadPool::global());
std::unique_ptr<ops::Backend> make_cpu_backend(ThreadPool* pool, const CpuBackendOptions& options);

}  // namespace frugal
