#!/usr/bin/env bash
# Session 54, run 5 (not run this session: no device time was left; for the next device call).
# Part A, the landed tree (8f9c428 on): CudaQuantGemm.* and CudaInt4Tiles8.*, which also run the
# warpgroup kernel's 16 / 32-token passes (wgmma n16 / n32, never run yet) through the test's
# "slab wg" entry (set_quant_slab_wg(1, 9)); 7B int4 at 64 sequences (warpgroup kernel, mma.sync
# kernel, bf16) and at 16 / 32 sequences with FRUGAL_QSLAB_WG_MIN=9 against the default.
# Part B, run5.diff applied in place and rebuilt (one object): the warpgroup kernel after run 3's
# instruction counts (12.98 M issued for the int4 gate at m = 64, ~391 a warp-quad): the x sums by
# an all-ones wgmma (was 382 instructions a (quad, token) item), the partial stores as pointer
# steps with the range tests hoisted (327 instructions a group store), the staging's token test
# hoisted, the batch loop alternating two code register sets (no copies). The same tests and
# points, so A and B compare on one machine. Predicted: -15-20% on the gate at m = 64.
# Run as: run(command: "STOP=560 bash docs/perf/data/2026-12-06-session54/run5.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s5.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
part() { # tag
  (timeout 150 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantGemm.*:CudaInt4Tiles8.*' >$L/ops_$1.log 2>&1
   echo "$1: ops tests rc $? ($((SECONDS-START)) s)" >>$S)
  grep -E "FAILED|PASSED|Failure" $L/ops_$1.log | head -8 >>$S
  grep -B2 -A8 "Failure" $L/ops_$1.log | head -24 >>$S
  (FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 60 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/qb_$1.log 2>&1
   echo "$1: qbench rc $? ($((SECONDS-START)) s)" >>$S)
  grep CHECK $L/qb_$1.log | grep FAIL | head -4 >>$S
  grep -E "qgemm-slab2ch m=(16|32|64)|qgemm-slabwg m=(16|32|64)" $L/qb_$1.log | head -6 >>$S
  e2e $1_int4_b64 /tmp/q7b "" $B --batches 64 --precision int4
  e2e $1_int4_b16_wg /tmp/q7b "FRUGAL_QSLAB_WG_MIN=9" $B --batches 16 --precision int4
}
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build
part A
e2e A_int4_b64_mma /tmp/q7b "FRUGAL_QSLAB_WG=0" $B --batches 64 --precision int4
e2e A_bf16_b64 /tmp/q7b "" $B --batches 64
e2e A_int4_b16 /tmp/q7b "" $B --batches 16 --precision int4
e2e A_bf16_b16 /tmp/q7b "" $B --batches 16
e2e A_int4_b32_wg /tmp/q7b "FRUGAL_QSLAB_WG_MIN=9" $B --batches 32 --precision int4
e2e A_int4_b32 /tmp/q7b "" $B --batches 32 --precision int4
git apply docs/perf/data/2026-12-06-session54/run5.diff && echo "run5.diff applied" >>$S
build
part B
finish 5
