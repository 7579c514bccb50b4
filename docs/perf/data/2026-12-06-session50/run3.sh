#!/usr/bin/env bash
# Session 50, run 3: the tree with the slab ring and the tiny down split gone.
# 1. `ctest -L cuda` on the whole tree (issue 18.1).
# 2. V2-Lite batch 1 at forced MLA split counts (environment only): the rule gives 4 splits of
#    two 32-key tiles at a 256-token context, 4 blocks for the step's attention.
# 3. On an H200: the issue points of 18.2 / 18.3 / 19.3.
# Run as: run(command: "STOP=540 bash docs/perf/data/2026-12-06-session50/run3.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s3.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
build
l=$(left); t=$((l - 120)); [ $t -gt 260 ] && t=260
if [ $t -gt 60 ]; then
  (cd build-gpu && timeout $t ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
  grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -16 >>$S
fi
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1 --batches 1"
e2e v2l_b1 /tmp/v2l "" $V
for n in 8 2; do e2e v2l_b1_sp$n /tmp/v2l "FRUGAL_MLA_SPLITS=$n" $V; done
if grep -q H200 $S; then
  B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
  B1="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
  for prec in int4 int8 fp8-channel; do e2e ${prec}_b1 /tmp/q7b "" $B1 --batches 1 --precision $prec; done
  e2e bf16_b1 /tmp/q7b "" $B1 --batches 1
  e2e int4_b16 /tmp/q7b "" $B --batches 16 --precision int4
  e2e bf16_b16 /tmp/q7b "" $B --batches 16
fi
finish 3
