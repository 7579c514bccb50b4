#!/usr/bin/env bash
# Session 48, run 4: decode attention's split rule. Run 3 measured one split (no combine) faster
# than the wave rule's 7 / 2 splits at 16 / 64 sequences of ~544 keys (int4 +6.4% / +8.7%, bf16
# +4.2% / +12.7%). The tree now gives each (sequence, kv head) unit one block from a quarter of
# the SMs' worth of units (decode_whole_units; FRUGAL_DECODE_WHOLE_UNITS=0 is the old rule).
# End to end at 1..64 sequences, new against old; the kernel sweep of split counts against the
# batch (cuda_kernel_bench --decode-splits); the attention tests.
# Run as: run(command: "bash docs/perf/data/2026-12-06-session48/run4.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s4.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_kernel_bench cuda_ops_test"; build; unset TARGETS
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
for b in 8 16 32 64 4; do
  e2e int4_b${b}_new /tmp/q7b "" $B --batches $b --precision int4
  e2e int4_b${b}_old /tmp/q7b "FRUGAL_DECODE_WHOLE_UNITS=0" $B --batches $b --precision int4
done
e2e bf16_b16_new /tmp/q7b "" $B --batches 16
e2e bf16_b64_new /tmp/q7b "" $B --batches 64
(timeout 120 build-gpu/tests/cuda/cuda_kernel_bench --decode-splits >$L/splits.txt 2>&1; echo "kbench splits rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "decode splits" $L/splits.txt >>$S
(timeout 120 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaAttention.*' >$L/attn.log 2>&1; echo "attention tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED" $L/attn.log | head -8 >>$S
finish 4
