#!/usr/bin/env bash
# Session 62, run 4 (the same warm H200): kernel traces of 7B int4 g128 and bf16 at 64 sequences
# and of V2-Lite batch 1, the last split by session 58's layer_split.py.
# Run as: run(command: "bash docs/perf/data/2026-12-07-session62/run4.sh", carry: [".devcarry"], needs_h200: true), after run 1's build.
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s4.txt
STOP=150
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
trace int4_b64 /tmp/q7b "" $B --batches 64 --precision int4
trace bf16_b64 /tmp/q7b "" $B --batches 64
trace v2l_b1 /tmp/v2l "" $V --batches 1
t=$L/trace_v2l_b1/decode_b1.trace.json
[ -f $t ] && python3 docs/perf/data/2026-12-07-session58/layer_split.py $t >>$S 2>&1
finish 4
