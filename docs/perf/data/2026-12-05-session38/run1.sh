#!/usr/bin/env bash
# Session 38, device call 1 of 3 (sessions 37 and 38 built CUDA changes on the CPU machine only;
# no device was lent). Build; the tests of both sessions' new kernels; ctest -L cuda; the quantized
# kernel rows (int4 g128) of cuda_kernel_bench with the slab GEMM beside the GEMV and the one-quad
# GEMM at m = 1..64.
#   session 37: CudaFused.{MoeRouter,RmsNormMatmul}*, CudaMoe.* (cuda_moe_shared_test, early tiny
#               path), CudaW8a8.RmsNormMatmul*, CudaAllFused/OpHarness.* (in ctest)
#   session 38: CudaQuantGemm.* (the slab GEMM in every shape, one row band, 8 KB slices),
#               CudaQuantFixture.* (the fixtures' 24-token prompt through the slab GEMM)
# Run as: run(command: "bash docs/perf/data/2026-12-05-session38/run1.sh", carry: [".devcarry"]),
# with the tree staged under 64 MiB. Calls 2 and 3 reuse build-gpu while the machine is warm.
source docs/perf/data/2026-12-05-session38/lib.sh
S=$OUT/s1.txt
build
T=build-gpu/tests/cuda
(timeout 90 $T/cuda_fused_test --gtest_filter='CudaFused.MoeRouter*:CudaFused.RmsNormMatmul*' >$L/fused.log 2>&1; echo "fused rc $?" >>$S)
(timeout 120 $T/cuda_moe_shared_test >$L/moe_shared.log 2>&1; echo "moe_shared rc $?" >>$S)
(timeout 120 $T/cuda_w8a8_test --gtest_filter='CudaW8a8.RmsNormMatmul*' >$L/w8a8.log 2>&1; echo "w8a8 rc $?" >>$S)
(timeout 150 $T/cuda_ops_test --gtest_filter='CudaQuantGemm.*' >$L/qgemm.log 2>&1; echo "qgemm rc $?" >>$S)
grep -E "FAILED|Failure" $L/fused.log $L/moe_shared.log $L/w8a8.log $L/qgemm.log | head -10 >>$S
grep -E "slab" $L/qgemm.log | head -5 >>$S
(cd build-gpu && timeout 220 ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -12 >>$S
l=$(left)
if [ $l -gt 30 ]; then
  FRUGAL_QBENCH_ONLY=int4g128 timeout $((l-5)) $T/cuda_kernel_bench --quant >$L/kbench_quant.txt 2>&1
  echo "kbench rc $? ($((SECONDS-START)) s)" >>$S
  grep -E "gate|down" $L/kbench_quant.txt | grep -E "m=(1|4|8|16|32|64) " | head -80 >>$S
else
  echo "kbench: no time ($l s)" >>$S
fi
finish 1
