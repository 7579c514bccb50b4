#!/usr/bin/env bash
# Session 52, run 3: run 2's split epilogues measured slower than the reduce kernel (int4 at 16
# sequences -2.7% / -1.0%). Each consumer thread added the slices one load at a time; here the
# loads of 4 slices are issued before they are added (split_epilogue.cuh, kSplitBatch; the same
# order of additions, so the same bits). The bit test, the A/B again, and a kernel trace of int4 at
# 16 sequences with the epilogues on.
# Run as: run(command: "STOP=290 bash docs/perf/data/2026-12-06-session52/run3.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s3.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test"; build; unset TARGETS
(timeout 60 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaFused.Split*' >$L/ops.log 2>&1
 echo "ops tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|differ|did not run|one slice" $L/ops.log | head -8 >>$S
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e int4_b16_s1 /tmp/q7b "FRUGAL_FUSE_SPLIT=1" $B --batches 16 --precision int4
e2e int4_b16_s0 /tmp/q7b "FRUGAL_FUSE_SPLIT=0" $B --batches 16 --precision int4
trace int4_b16_tr /tmp/q7b "FRUGAL_FUSE_SPLIT=1" $B --batches 16 --precision int4
e2e int8_b16_s1 /tmp/q7b "FRUGAL_FUSE_SPLIT=1" $B --batches 16 --precision int8
e2e int8_b16_s0 /tmp/q7b "FRUGAL_FUSE_SPLIT=0" $B --batches 16 --precision int8
e2e int4_b64_s1 /tmp/q7b "FRUGAL_FUSE_SPLIT=1" $B --batches 64 --precision int4
e2e int4_b64_s0 /tmp/q7b "FRUGAL_FUSE_SPLIT=0" $B --batches 64 --precision int4
e2e int4_b16_s1b /tmp/q7b "FRUGAL_FUSE_SPLIT=1" $B --batches 16 --precision int4
e2e int4_b16_s0b /tmp/q7b "FRUGAL_FUSE_SPLIT=0" $B --batches 16 --precision int4
finish 3
