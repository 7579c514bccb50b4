#!/usr/bin/env bash
# Session 47, run 1: which GEMVs the lean GEMV's shared-memory ring (session 46's ring.diff, now
# in the tree as an opt-in) helps inside the step graphs. Session 46's run 2 (H100) measured the
# ring of 3 at +5.8% on the 7B int4 batch-1 decode and +1.8% int8, -6.3% fp8, while the kernel
# bench had it 1.5% faster on the fused gate/up and 20% slower on down: so per GEMV class
# (FRUGAL_QGEMV_RING_ON: 1 gate/up, 2 k > n (down), 4 q/k/v and o) and with a kernel trace of
# ring 0 / 3, to see each kernel's time in the graph.
# Then the GEMV tests and the fixtures against transformers with the new default (int4 / int8
# through the ring of 3).
# Run as: run(command: "bash docs/perf/data/2026-12-06-session47/run1.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_quant_model_test"; build; unset TARGETS
B="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
e2e int4_b1_r0 /tmp/q7b "FRUGAL_QGEMV_RING=0" $B --batches 1 --precision int4
for on in 7 1 2 4 5; do e2e int4_b1_r3_on$on /tmp/q7b "FRUGAL_QGEMV_RING=3 FRUGAL_QGEMV_RING_ON=$on" $B --batches 1 --precision int4; done
e2e int4_b1_r0_again /tmp/q7b "FRUGAL_QGEMV_RING=0" $B --batches 1 --precision int4
e2e int4_b1_default /tmp/q7b "" $B --batches 1 --precision int4
for on in 7 5; do e2e int8_b1_r3_on$on /tmp/q7b "FRUGAL_QGEMV_RING=3 FRUGAL_QGEMV_RING_ON=$on" $B --batches 1 --precision int8; done
e2e int8_b1_r0 /tmp/q7b "FRUGAL_QGEMV_RING=0" $B --batches 1 --precision int8
T="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 64 --reps 1 --warmup 1"
(timeout 120 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaInt4Tiles8.*:CudaQuantGemv.*' >$L/tests.log 2>&1; echo "gemv tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|differ|Expected" $L/tests.log | head -8 >>$S
(timeout 100 build-gpu/tests/cuda/cuda_quant_model_test >$L/qmodel.log 2>&1; echo "cuda_quant_model_test (default ring) rc $?" >>$S)
grep -E "FAILED|PASSED" $L/qmodel.log | head -4 >>$S
trace int4_b1_r0_trace /tmp/q7b "FRUGAL_QGEMV_RING=0" $T --batches 1 --precision int4
trace int4_b1_r3_trace /tmp/q7b "FRUGAL_QGEMV_RING=3" $T --batches 1 --precision int4
finish 1
