#!/usr/bin/env bash
# Session 53, run 1: split_rms_norm over a cluster of blocks a token (FRUGAL_SPLIT_NORM_CLUSTER:
# 8 = up to 8 blocks, the new default; 1 = one block a token, session 52's kernel) and the slab
# GEMM's L2 policies (FRUGAL_QSLAB_L2: 1 codes evict_first, 2 partials evict_last, 3 both; 0 off).
# The bit tests first (the cluster kernel against reduce-then-norm; again with the L2 policies on),
# then the A/B at 16 and 64 sequences, the bf16 references, and traces.
# The code it ran is run1.diff (on 35f85e7: git apply docs/perf/data/2026-12-06-session53/run1.diff;
# the cluster kernel and the L2 hints did not land, see 2026-12-06-session53.md).
# Run as: run(command: "STOP=560 bash docs/perf/data/2026-12-06-session53/run1.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test"; build; unset TARGETS
for hints in 0 3; do
  (FRUGAL_QSLAB_L2=$hints timeout 90 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaFused.Split*:CudaFused.RmsNorm*' >$L/ops$hints.log 2>&1
   echo "ops tests (L2 $hints) rc $? ($((SECONDS-START)) s)" >>$S)
  grep -E "FAILED|Failure|PASSED|differ|did not run|one slice" $L/ops$hints.log | head -8 >>$S
done
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e int4_b16_c1 /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=1" $B --batches 16 --precision int4
e2e int4_b16_c8 /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=8" $B --batches 16 --precision int4
e2e int4_b64_c1 /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=1" $B --batches 64 --precision int4
e2e int4_b64_c8 /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=8" $B --batches 64 --precision int4
for h in 1 2 3; do
  e2e int4_b64_c8_l$h /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=8 FRUGAL_QSLAB_L2=$h" $B --batches 64 --precision int4
  e2e int4_b16_c8_l$h /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=8 FRUGAL_QSLAB_L2=$h" $B --batches 16 --precision int4
done
trace int4_b16_tr /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=8" $B --batches 16 --precision int4
trace int4_b64_tr /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=8" $B --batches 64 --precision int4
trace int4_b64_tr_l3 /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=8 FRUGAL_QSLAB_L2=3" $B --batches 64 --precision int4
e2e int8_b16_c1 /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=1" $B --batches 16 --precision int8
e2e int8_b16_c8 /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=8" $B --batches 16 --precision int8
e2e bf16_b16 /tmp/q7b "" $B --batches 16
e2e bf16_b64 /tmp/q7b "" $B --batches 64
# Repeats, the other order.
e2e int4_b16_c8b /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=8" $B --batches 16 --precision int4
e2e int4_b16_c1b /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=1" $B --batches 16 --precision int4
e2e int4_b64_c8b /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=8" $B --batches 64 --precision int4
e2e int4_b64_c1b /tmp/q7b "FRUGAL_SPLIT_NORM_CLUSTER=1" $B --batches 64 --precision int4
finish 1
