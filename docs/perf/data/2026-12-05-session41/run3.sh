#!/usr/bin/env bash
# Session 41's plan for the next device call (built after the session's device time ran out):
# the slab GEMM with two mma chains a token tile (FRUGAL_QSLAB_CHAINS=2, opt-in) against one.
#  - correctness: CudaQuantGemm.* (both chain counts, every format and shape);
#  - kernel: cuda_kernel_bench --quant on the int4 gate and down (qgemm-slab against
#    qgemm-slab2ch rows, m 1..64);
#  - end to end: 7B int4 decode at 16 and 64 sequences (512-token prompts), 1 chain against 2,
#    and bf16 at 16 for the ratio of issue 18.3.
# Run as: run(command: "bash docs/perf/data/2026-12-05-session41/run3.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s3.txt
# Only the three binaries this run uses (a fresh machine builds them in less time than the tree).
[ -x build-gpu/src/cli/frugal ] || { export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build; unset TARGETS; }
(timeout 150 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantGemm.*' >$L/qgemm.log 2>&1; echo "CudaQuantGemm rc $?" >>$S)
grep -E "FAILED|Failure" $L/qgemm.log | head -6 >>$S
for shape in gate down; do
  (FRUGAL_QBENCH_ONLY="int4g128 $shape" timeout 120 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kb_$shape.txt 2>&1; echo "kbench $shape rc $?" >>$S)
  grep -E "^qgemm-slab(2ch)? m=|CHECK.*slab2ch.*|FAIL" $L/kb_$shape.txt | grep -v " u[24]r1 " | head -30 >>$S
done
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e q7b_int4_b16_ch1 /tmp/q7b "" $B --batches 16 --precision int4
e2e q7b_int4_b16_ch2 /tmp/q7b "FRUGAL_QSLAB_CHAINS=2" $B --batches 16 --precision int4
e2e q7b_bf16_b16 /tmp/q7b "" $B --batches 16
e2e q7b_int4_b64_ch1 /tmp/q7b "" $B --batches 64 --precision int4
e2e q7b_int4_b64_ch2 /tmp/q7b "FRUGAL_QSLAB_CHAINS=2" $B --batches 64 --precision int4
e2e q7b_bf16_b64 /tmp/q7b "" $B --batches 64
finish 3
