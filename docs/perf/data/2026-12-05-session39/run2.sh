#!/usr/bin/env bash
# Session 39, device call 2 (right after call 1, on the warm machine): the int4 gate rows of the
# bulk GEMV again, Nsight Compute on its m = 1 launch (run2/ncu_bulk_v1_gate_m1.txt: 181
# registers, one block of 4 consumer warps an SM, 7.8% occupancy), and the W8A8 tests with fast
# accumulation (cuBLASLt had no FP8 algorithm with it for 128 x 128 block scales).
bash scripts/gpu/check.sh build >/tmp/b.log 2>&1; echo build $?
FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 60 build-gpu/tests/cuda/cuda_kernel_bench --quant 2>&1 | grep -E "qgemv(-bulk)? m=(1|8) " | grep -v "u[124]w" | head -20
KERNEL=quant_gemv_bulk_kernel LAUNCHES="0" timeout 200 bash scripts/gpu/qgemv_profile.sh 2>&1 | tail -15
FRUGAL_FP8_FAST_ACCUM=1 timeout 60 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaW8a8.*' 2>&1 | grep -E "Failure|OK \]|FAILED \]|no FP8|cuBLASLt" | head -20
