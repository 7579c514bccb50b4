#!/usr/bin/env bash
# Session 53, run 3: the tree as landed (no L2 hints, no cluster norm). With the reduce now inside
# the split epilogues, do fewer token tiles a pass (FRUGAL_QSLAB_MT: fewer slices, so fewer
# partials, for another pass over the codes) or a smaller slice cap (FRUGAL_QSLAB_SMEM_KB) win
# at 64 / 16 sequences? Session 48 measured both slower with the reduce kernel.
# Run as: run(command: "STOP=300 bash docs/perf/data/2026-12-06-session53/run3.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s3.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal"; build; unset TARGETS
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e int4_b64 /tmp/q7b "" $B --batches 64 --precision int4
e2e int4_b64_mt4 /tmp/q7b "FRUGAL_QSLAB_MT=4" $B --batches 64 --precision int4
e2e int4_b64_mt2 /tmp/q7b "FRUGAL_QSLAB_MT=2" $B --batches 64 --precision int4
e2e int4_b16 /tmp/q7b "" $B --batches 16 --precision int4
e2e int4_b16_kb100 /tmp/q7b "FRUGAL_QSLAB_SMEM_KB=100" $B --batches 16 --precision int4
e2e int4_b16_mt1 /tmp/q7b "FRUGAL_QSLAB_MT=1" $B --batches 16 --precision int4
e2e int4_b64b /tmp/q7b "" $B --batches 64 --precision int4
e2e int4_b64_mt4b /tmp/q7b "FRUGAL_QSLAB_MT=4" $B --batches 64 --precision int4
finish 3
