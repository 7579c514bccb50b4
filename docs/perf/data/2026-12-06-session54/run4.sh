#!/usr/bin/env bash
# Session 54, run 4 (same warm H100 as run 3, build kept): the 18.3 baselines on this machine,
# bf16 and int4 (the warpgroup kernel, the default) at 64 and 16 sequences, alternated.
# Run as: run(command: "STOP=200 bash docs/perf/data/2026-12-06-session54/run4.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s4.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
[ -x build-gpu/src/cli/frugal ] || { export TARGETS="frugal"; build; unset TARGETS; }
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e bf16_b64 /tmp/q7b "" $B --batches 64
e2e int4_b64 /tmp/q7b "" $B --batches 64 --precision int4
e2e bf16_b64b /tmp/q7b "" $B --batches 64
e2e int4_b64b /tmp/q7b "" $B --batches 64 --precision int4
e2e int4_b16 /tmp/q7b "" $B --batches 16 --precision int4
e2e bf16_b16 /tmp/q7b "" $B --batches 16
finish 4
