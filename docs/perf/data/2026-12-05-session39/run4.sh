#!/usr/bin/env bash
# Session 39, device call 4 (right after call 3, warm): Nsight Compute on the lean bulk GEMV's
# m = 1 launch, int4 g128 with zero points (run4/ncu_bulk_v2_gate_m1.txt).
bash scripts/gpu/check.sh build >/tmp/b.log 2>&1; echo build $?
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 120 $NCU --set full -k regex:quant_gemv_bulk_kernel -s 0 -c 1 \
  build-gpu/tests/cuda/cuda_kernel_bench --quant > $OUT/ncu_bulk_v2.txt 2>&1; echo ncu $?
