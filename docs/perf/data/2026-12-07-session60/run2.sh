#!/usr/bin/env bash
# Not run in session 60: the device refused a start with 271 s left (too little for one).
# Session 60, run 2: the session's last ~270 device seconds, on whatever card comes. The landed
# tree after the L2 hint's removal: V2-Lite batch 1 (the default sequence) and 7B batch 1 in int4
# g128 and bf16 (18.2), once each, as far as the time goes (build first, ~90 s).
# Run as: run(command: "STOP=200 bash docs/perf/data/2026-12-07-session60/run2.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal"; build; unset TARGETS
v2l_b1 v2l_seq FRUGAL_FUSE_MLA_ATTN=0
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
e2e q7b_int4_b1 /tmp/q7b "" $V --batches 1 --precision int4
e2e q7b_bf16_b1 /tmp/q7b "" $V --batches 1
e2e q7b_int8_b1 /tmp/q7b "" $V --batches 1 --precision int8
finish 2
