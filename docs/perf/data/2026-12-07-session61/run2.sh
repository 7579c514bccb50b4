#!/usr/bin/env bash
# Session 61, run 2 (the same warm H100 right after run 1, same tree): run 1 left two questions
# inside its run-to-run spread (all on 387.4 / 393.9): whether the early weight loads of the
# batched GEMV, W_UV and the prologue + absorb launch pay (without them 394.2 / 391.2), and
# whether 8 forced MLA splits beat the rule (394.6). Three interleaved rounds of each.
# Run as: run(command: "STOP=280 bash docs/perf/data/2026-12-07-session61/run2.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
[ -x build-gpu/src/cli/frugal ] || { export TARGETS="frugal"; build; unset TARGETS; }
for i in 1 2 3; do
  v2l_b1 all_$i ""
  v2l_b1 gemv_off_$i FRUGAL_BATCHED_GEMV_EARLY=0
  v2l_b1 splits8_$i FRUGAL_MLA_SPLITS=8
done
finish 2
