#!/usr/bin/env bash
# Session 47, run 2: run 1 cut to what fits the device time left (no tests, no traces: the
# ring's tests ran in session 46's run 2 on the same kernels): the 7B int4 / int8 batch-1 decode
# with the ring of 3 on every GEMV class, on all but down (FRUGAL_QGEMV_RING_ON=5), down only (2),
# the registers (0), and the default.
# Run as: run(command: "bash docs/perf/data/2026-12-06-session47/run2.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal"; build; unset TARGETS
B="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
e2e int4_b1_r0 /tmp/q7b "FRUGAL_QGEMV_RING=0" $B --batches 1 --precision int4
for on in 7 5 2; do e2e int4_b1_r3_on$on /tmp/q7b "FRUGAL_QGEMV_RING=3 FRUGAL_QGEMV_RING_ON=$on" $B --batches 1 --precision int4; done
e2e int4_b1_default /tmp/q7b "" $B --batches 1 --precision int4
for on in 7 5; do e2e int8_b1_r3_on$on /tmp/q7b "FRUGAL_QGEMV_RING=3 FRUGAL_QGEMV_RING_ON=$on" $B --batches 1 --precision int8; done
e2e int8_b1_r0 /tmp/q7b "FRUGAL_QGEMV_RING=0" $B --batches 1 --precision int8
e2e int4_b1_r0_again /tmp/q7b "FRUGAL_QGEMV_RING=0" $B --batches 1 --precision int4
finish 2
