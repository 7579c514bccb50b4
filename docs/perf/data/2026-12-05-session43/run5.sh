#!/usr/bin/env bash
# Session 43, device calls 5 and 6, on run 4's warm machine (an H100), typed inline at the time and
# kept here as run. Call 5: the quantized GEMV / GEMM tests that run 4's 120-second window cut
# off (CudaW8a8's 108-second test ran first), and the int4 gate's GEMV rows twice. Call 6 (after
# reverting the lean GEMV's 32-bit scale offsets in the working tree, commit f1bc3dc -> the next):
# the same rows twice. Both outputs are in docs/perf/2026-12-05-session43.md.
(cd build-gpu/tests/cuda && timeout 150 ./cuda_ops_test --gtest_filter='CudaQuantGemm.*:CudaQuantGemv.*:CudaMoe.*Quantized*' 2>&1 |
  grep -E "^\[ *(OK|FAILED|PASSED) |Failure|differs" | head -20)
cmake --build build-gpu --target cuda_kernel_bench -j 16 2>&1 | tail -1
for i in 1 2; do
  FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 50 build-gpu/tests/cuda/cuda_kernel_bench --quant 2>&1 |
    grep -E "^qgemv(-lean)? m=(1|8) int4g128 gate 18944x3584 +[0-9]" | head -4
done
