#!/usr/bin/env bash
# Session 51, run 2: the slab GEMM's k slices added in a thread-block cluster through distributed
# shared memory (no f32 partials in global memory, no reduce kernel), one build, A/B by
# FRUGAL_QSLAB_CLUSTER=0 (the reduce kernel).
# 1. CudaQuantGemm.* (with the cluster-vs-reduce-kernel bit check) and CudaInt4Tiles8.*.
# 2. Kernel rows (int4 gate) both ways; 7B int4 / int8 at 16 and int4 at 64 sequences both ways;
#    a kernel trace of int4 at 16 (no reduce kernels left in the graph).
# 3. On an H200: the issue points.
# Run as: run(command: "STOP=540 bash docs/perf/data/2026-12-06-session51/run2.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build; unset TARGETS
(timeout 150 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaInt4Tiles8.*:CudaQuantGemm.*' >$L/tests.log 2>&1
 echo "tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|differ|took" $L/tests.log | head -12 >>$S
for c in 1 0; do
  FRUGAL_QSLAB_CLUSTER=$c FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 60 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kq_c$c.txt 2>&1
  echo "kbench cluster=$c rc $? ($((SECONDS-START)) s)" >>$S
  grep -E "qgemm-slab2ch m=(9|16|32|64) " $L/kq_c$c.txt | head -4 | sed "s/^/c$c /" >>$S
done
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
for prec in int4 int8; do
  e2e ${prec}_b16_c1 /tmp/q7b "FRUGAL_QSLAB_CLUSTER=1" $B --batches 16 --precision $prec
  e2e ${prec}_b16_c0 /tmp/q7b "FRUGAL_QSLAB_CLUSTER=0" $B --batches 16 --precision $prec
done
e2e int4_b64_c1 /tmp/q7b "FRUGAL_QSLAB_CLUSTER=1" $B --batches 64 --precision int4
e2e int4_b64_c0 /tmp/q7b "FRUGAL_QSLAB_CLUSTER=0" $B --batches 64 --precision int4
trace int4_b16_tr /tmp/q7b "FRUGAL_QSLAB_CLUSTER=1" $B --batches 16 --precision int4
if grep -q H200 $S; then
  B1="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
  e2e int4_b1 /tmp/q7b "" $B1 --batches 1 --precision int4
  e2e bf16_b16 /tmp/q7b "" $B --batches 16
fi
finish 2
