#!/usr/bin/env bash
# Session 53, run 4: the split epilogues load the slices `batch` at a time with slice 0 in the
# first batch (session 52: slice 0 alone, then batches of 4). The slab GEMM leaves 4 (gate_up),
# 7 (qkv, o) and 9 (down) slices at 16 tokens, 17 for down at 64: batches of 8 take 1-3 round
# trips where 2-5 were taken. FRUGAL_SPLIT_BATCH=8 (the new default) against 4 and 1, one build;
# the bit test with 8 and with 3 (a batch that ends inside the slices).
# Run as: run(command: "STOP=200 bash docs/perf/data/2026-12-06-session53/run4.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s4.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test"; build; unset TARGETS
for b in 8 3; do
  (FRUGAL_SPLIT_BATCH=$b timeout 60 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaFused.Split*' >$L/ops$b.log 2>&1
   echo "ops tests (batch $b) rc $? ($((SECONDS-START)) s)" >>$S)
  grep -E "FAILED|Failure|PASSED|differ|did not run|one slice" $L/ops$b.log | head -6 >>$S
done
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e int4_b16_k8 /tmp/q7b "FRUGAL_SPLIT_BATCH=8" $B --batches 16 --precision int4
e2e int4_b16_k4 /tmp/q7b "FRUGAL_SPLIT_BATCH=4" $B --batches 16 --precision int4
e2e int4_b64_k8 /tmp/q7b "FRUGAL_SPLIT_BATCH=8" $B --batches 64 --precision int4
e2e int4_b64_k4 /tmp/q7b "FRUGAL_SPLIT_BATCH=4" $B --batches 64 --precision int4
e2e int4_b16_k4b /tmp/q7b "FRUGAL_SPLIT_BATCH=4" $B --batches 16 --precision int4
e2e int4_b16_k8b /tmp/q7b "FRUGAL_SPLIT_BATCH=8" $B --batches 16 --precision int4
e2e int4_b16_k1 /tmp/q7b "FRUGAL_SPLIT_BATCH=1" $B --batches 16 --precision int4
e2e int8_b16_k8 /tmp/q7b "FRUGAL_SPLIT_BATCH=8" $B --batches 16 --precision int8
e2e int8_b16_k4 /tmp/q7b "FRUGAL_SPLIT_BATCH=4" $B --batches 16 --precision int8
finish 4
