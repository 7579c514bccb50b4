#!/usr/bin/env bash
# Session 61, run 3: the H200 point of 19.3 on the landed tree (e1ff7ee), if an H200 comes. Runs
# 1-2 (H100) measured V2-Lite batch 1 376.7 -> 392.8 tok/s (+4.3%) with the prologue + absorb
# launch and the MLA kernel's early rows; the H200 record is 422.6 (session 45's tree). Predicted
# ~440 on the H200 (422.6 x 1.043; this tree also has sessions 46-60's changes, which moved the
# H100 from ~364 to ~370-377). Two rounds of the default and of all three switches off.
# Run as: run(command: "STOP=250 bash docs/perf/data/2026-12-07-session61/run3.sh", carry: [".devcarry"], needs_h200: true)
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s3.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal"; build; unset TARGETS
OFF="FRUGAL_MLA_EARLY=0 FRUGAL_BATCHED_GEMV_EARLY=0 FRUGAL_FUSE_MLA_PRO_ABS=0"
for i in 1 2; do
  v2l_b1 all_$i ""
  v2l_b1 none_$i "$OFF"
done
finish 3
