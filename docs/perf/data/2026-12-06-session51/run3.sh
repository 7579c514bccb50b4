#!/usr/bin/env bash
# Session 51, run 3: the issue points on today's tree (no kernel change this session), on
# whichever card comes: 7B batch 1 in every precision (18.2), int4 against bf16 at 16 and 64
# sequences (18.3), V2-Lite batch 1 (19.3).
# Run as: run(command: "STOP=540 bash docs/perf/data/2026-12-06-session51/run3.sh", kind: nvidia-h200).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s3.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal"; build; unset TARGETS
B1="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
for prec in int4 int8 fp8-channel; do e2e ${prec}_b1 /tmp/q7b "" $B1 --batches 1 --precision $prec; done
e2e bf16_b1 /tmp/q7b "" $B1 --batches 1
e2e v2l_b1 /tmp/v2l "" $B1 --batches 1
for b in 16 64; do
  e2e int4_b$b /tmp/q7b "" $B --batches $b --precision int4
  e2e bf16_b$b /tmp/q7b "" $B --batches $b
done
finish 3
