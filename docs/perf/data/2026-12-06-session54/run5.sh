#!/usr/bin/env bash
# Session 54, run 5: the warpgroup kernel after run 3's instruction counts (12.98 M issued for the
# int4 gate at m = 64, ~391 a warp-quad): the x sums by an all-ones wgmma (was 382 instructions a
# (quad, token) item), the partial stores as pointer steps with the range tests hoisted (327
# instructions a group store), the staging's token test hoisted, the batch loop alternating two
# code register sets (no copies); and 16 / 32 tokens a pass (wgmma n16 / n32; 128 registers at 16,
# two blocks an SM), tried at 16 and 32 sequences by FRUGAL_QSLAB_WG_MIN=9.
# Tests, the gate / down kernels, 7B int4 against the mma.sync kernel and bf16.
# The tree: 8f9c428 with run5.diff applied (the four changes above; the n16 / n32 passes are in 8f9c428).
# Run as: run(command: "git apply docs/perf/data/2026-12-06-session54/run5.diff && STOP=270 bash docs/perf/data/2026-12-06-session54/run5.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s5.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build; unset TARGETS
(timeout 150 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantGemm.*:CudaInt4Tiles8.*' >$L/ops.log 2>&1
 echo "ops tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|PASSED|tests ran|Failure" $L/ops.log | head -12 >>$S
grep -B2 -A8 "Failure" $L/ops.log | head -30 >>$S
for sh in "int4g128 gate" "int4g128 down"; do
  [ $(left) -gt 120 ] || continue
  (FRUGAL_QBENCH_ONLY="$sh" timeout 60 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/qb.log 2>&1; echo "qbench $sh rc $? ($((SECONDS-START)) s)" >>$S)
  grep CHECK $L/qb.log | grep -E "FAIL" | head -6 >>$S
  grep -E "qgemm-slab2ch m=(16|32|64)|qgemm-slabwg m=(16|32|64)" $L/qb.log | head -6 >>$S
  cat $L/qb.log >>$L/qb_all.log
done
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e int4_b64_wg /tmp/q7b "" $B --batches 64 --precision int4
e2e int4_b64_mma /tmp/q7b "FRUGAL_QSLAB_WG=0" $B --batches 64 --precision int4
e2e bf16_b64 /tmp/q7b "" $B --batches 64
e2e int4_b16_wg /tmp/q7b "FRUGAL_QSLAB_WG_MIN=9" $B --batches 16 --precision int4
e2e int4_b16_mma /tmp/q7b "" $B --batches 16 --precision int4
e2e bf16_b16 /tmp/q7b "" $B --batches 16
e2e int4_b32_wg /tmp/q7b "FRUGAL_QSLAB_WG_MIN=9" $B --batches 32 --precision int4
e2e int4_b32_mma /tmp/q7b "" $B --batches 32 --precision int4
finish 5
