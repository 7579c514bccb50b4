#!/usr/bin/env bash
# Session 49, run 3: 8-warp blocks made the default where a bf16 batch's blocks fit one an SM at
# 3 stages (run 2: 16 sequences +1.3%). The dispatch test, a decode batch that takes the new
# path (every cache type), and the default end to end at 16 / 32 sequences (int4) and 16 (bf16).
# Run as: run(command: "bash docs/perf/data/2026-12-06-session49/run3.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s3.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test"; build; unset TARGETS
(timeout 120 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaAttention.DecodeTuningDispatch:CudaAttention.DecodeBatchFewerBlocksThanSms:CudaAttention.DecodeManyShortSequences:CudaAttention.DecodeSplitKv:CudaAttention.DecodeLargeBatchOneLongContext' \
  >$L/attn.log 2>&1; echo "attention tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|OK \]|Expected|Which is" $L/attn.log | head -16 >>$S
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e int4_b16 /tmp/q7b "" $B --batches 16 --precision int4
e2e int4_b16_w4 /tmp/q7b "FRUGAL_DECODE_MMA_WARPS=4" $B --batches 16 --precision int4
e2e int4_b32 /tmp/q7b "" $B --batches 32 --precision int4
e2e bf16_b16 /tmp/q7b "" $B --batches 16
finish 3
