#!/usr/bin/env bash
# Session 56, run 2 (STOP=330 or more): the tree as landed in 52bd6e3 (session 55's wg_nt48 +
# wg_stage + wg_nt32x2 together): the op tests of the quantized GEMMs, the int4 kernel table,
# 7B int4 at 16 / 32 / 40 / 64 sequences. Written for the warm machine of run 1, which went back
# seconds before the call; the next start was refused.
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build
(timeout 200 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantGemm.*:CudaInt4Tiles8.*:CudaFused.*' >$L/ops.log 2>&1
 echo "ops tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|PASSED" $L/ops.log | head -8 >>$S
grep -B2 -A8 "Failure" $L/ops.log | head -24 >>$S
(FRUGAL_QBENCH_ONLY="int4g128" timeout 90 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/qb.log 2>&1
 echo "qbench rc $? ($((SECONDS-START)) s)" >>$S)
grep CHECK $L/qb.log | grep -c ok >>$S
grep CHECK $L/qb.log | grep FAIL | head -4 >>$S
grep -E "qgemm-slabwg m=(9|12|16|32|40|48|64) int4g128 (gate|down)" $L/qb.log | head -14 >>$S
for n in 16 32 40 64; do e2e L_int4_b$n /tmp/q7b "" $B --batches $n --precision int4; done
finish 2
