#!/usr/bin/env bash
# Session 48, run 2: where a decode step's time goes at 16 and 64 sequences (issue 18.3), int4
# against bf16. Session 45 measured 7B int4 at 16 sequences (512-token prompts) at 3,672 tok/s,
# a 4.36 ms step, while the int4 weights (4.45 GB) at the slab GEMM's isolated rate would take
# about 1.7 ms: the kernel trace of those steps has never been taken. One traced point each.
# Run as: run(command: "bash docs/perf/data/2026-12-06-session48/run2.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal"; build; unset TARGETS
T="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 1 --warmup 1"
trace int4_b16 /tmp/q7b "" $T --batches 16 --precision int4
trace bf16_b16 /tmp/q7b "" $T --batches 16
trace int4_b64 /tmp/q7b "" $T --batches 64 --precision int4
trace bf16_b64 /tmp/q7b "" $T --batches 64
trace int4_b8 /tmp/q7b "" $T --batches 8 --precision int4
finish 2
