#!/usr/bin/env bash
# Session 50, run 7 (written for the next device call; it has not run): run 6's row pointers for
# the two-row-tile slab kernels too (17..64 tokens by default), as row_ptrs_r2.diff. ptxas 13:
# int4 MT 8 227 / 250 -> 235 / 241 registers, MT 4 187 / 202 -> 195 / 210, zero points
# 255 / 247 / 207 / 215 -> 255 / 251 / 213 / 219, no spills (one block an SM either way).
# 1. Apply the diff in this checkout; a copy without it is the A side, each built here.
# 2. CudaInt4Tiles8.* and CudaQuantGemm.* on the new tree (the same loads, so the same bits).
# 3. Kernel rows (int4 gate slab2ch at m = 33 / 64) and 7B int4 / int8 at 32 / 64 sequences, A/B.
# 4. On an H200: the issue points.
# Run as: run(command: "STOP=540 bash docs/perf/data/2026-12-06-session50/run7.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
source docs/perf/data/2026-12-06-session50/ab.sh
S=$OUT/s7.txt
D=docs/perf/data/2026-12-06-session50
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
copy_tree
patch -p1 <$D/row_ptrs_r2.diff >>$S 2>&1 || { echo "patch failed" >>$S; finish 7; exit 0; }
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build; unset TARGETS
build_old "frugal cuda_kernel_bench"
quant_tests
kbench_ab "qgemm-slab2ch m=(16|32|64) "
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
for b in 64 32; do
  e2eb int4_b${b}_new build-gpu $B --batches $b --precision int4
  e2eb int4_b${b}_old /tmp/old/build-gpu $B --batches $b --precision int4
done
e2eb int8_b64_new build-gpu $B --batches 64 --precision int8
e2eb int8_b64_old /tmp/old/build-gpu $B --batches 64 --precision int8
if grep -q H200 $S; then
  B1="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
  for prec in int4 int8 fp8-channel; do e2eb ${prec}_b1 build-gpu $B1 --batches 1 --precision $prec; done
  e2eb bf16_b1 build-gpu $B1 --batches 1
  e2eb int4_b16 build-gpu $B --batches 16 --precision int4
  e2eb bf16_b16 build-gpu $B --batches 16
  e2eb bf16_b64 build-gpu $B --batches 64
fi
finish 7
