#!/usr/bin/env bash
# Session 65, run 11, as it ran (one command line, saved here): the 18.2 batch-1 points and the
# bf16 side of 18.3 on run 9's warm machine (build-gpu from run9.sh; no build here). The int4
# side of 18.3 is run 10's base.
# Run as: run(command: "bash docs/perf/data/2026-12-08-session65/run11.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s11.txt
STOP=${STOP:-200}
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
B1="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
for prec in int4 int8 fp8-channel; do e2e ${prec}_b1 /tmp/q7b "" $B1 --batches 1 --precision $prec; done
e2e bf16_b1 /tmp/q7b "" $B1 --batches 1
e2e bf16_b16 /tmp/q7b "" $B --batches 16
e2e bf16_b64 /tmp/q7b "" $B --batches 64
finish 11
