#!/usr/bin/env bash
# Session 38, device call 1 of 3 (sessions 37 and 38 built CUDA changes on the CPU machine only;
# no device was lent). Build; the tests of both sessions' new kernels; then ctest -L cuda.
#   session 37: CudaFused.{MoeRouter,RmsNormMatmul}*, CudaMoe.* (cuda_moe_shared_test, early tiny
#               path), CudaW8a8.RmsNormMatmul*, CudaAllFused/OpHarness.* (in ctest)
#   session 38: CudaQuantGemm.* (the slab GEMM in every shape, one row band, 8 KB slices),
#               CudaSlab/OpHarness.* and CudaQuantFixture.* (in ctest)
# Run as: run(command: "bash docs/perf/data/2026-12-05-session38/run1.sh", carry: [".devcarry"]),
# with the tree staged under 64 MiB. Calls 2 and 3 reuse build-gpu while the machine is warm.
source docs/perf/data/2026-12-05-session38/lib.sh
S=$OUT/s1.txt
build
T=build-gpu/tests/cuda
(timeout 90 $T/cuda_ops_test --gtest_filter='CudaQuantGemm.*' >$L/qgemm.log 2>&1; echo "qgemm rc $?" >>$S)
(timeout 60 $T/cuda_ops_test --gtest_filter='CudaFused.MoeRouter*:CudaFused.RmsNormMatmul*' >$L/fused.log 2>&1; echo "fused rc $?" >>$S)
(timeout 60 $T/cuda_ops_test --gtest_filter='CudaMoe.*' >$L/moe_shared.log 2>&1; echo "moe_shared rc $?" >>$S)
(timeout 60 $T/cuda_ops_test --gtest_filter='CudaW8a8.RmsNormMatmul*' >$L/w8a8.log 2>&1; echo "w8a8 rc $?" >>$S)
grep -E "FAILED|Failure" $L/qgemm.log $L/fused.log $L/moe_shared.log $L/w8a8.log | head -12 >>$S
(cd build-gpu && timeout $(( $(left) - 5 )) ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -12 >>$S
finish 1
