#!/usr/bin/env bash
# Session 50, run 6: the slab GEMM's load cursor with its two row pointers built once a group
# (one row tile a warp: m <= 16 by default) instead of for every chunk. Run 4's SASS of the int4
# m = 16 kernel: ~135 of the ~1,060 instructions of a 2-quad batch rebuilt the clamped rows, both
# layouts' addresses and their 64-bit products each batch. Same loads, same bits.
# A/B on one machine: this tree against a copy with the previous header, each built here. The
# previous header is not kept in the tree; before the call:
#   git show 2e95c27:src/backend/cuda/quant_gemm_slab.cuh > docs/perf/data/2026-12-06-session50/quant_gemm_slab_before.cuh
# Run as: run(command: "STOP=360 bash docs/perf/data/2026-12-06-session50/run6.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
source docs/perf/data/2026-12-06-session50/ab.sh
S=$OUT/s6.txt
D=docs/perf/data/2026-12-06-session50
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
copy_tree
cp $D/quant_gemm_slab_before.cuh /tmp/old/src/backend/cuda/quant_gemm_slab.cuh
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build; unset TARGETS
build_old "frugal cuda_kernel_bench"
quant_tests
kbench_ab "qgemm-slab2ch m=(1|9|16) "
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1 --batches 16"
e2eb int4_b16_new build-gpu $B --precision int4
e2eb int4_b16_old /tmp/old/build-gpu $B --precision int4
e2eb int8_b16_new build-gpu $B --precision int8
e2eb int8_b16_old /tmp/old/build-gpu $B --precision int8
e2eb int4_b16_new2 build-gpu $B --precision int4
finish 6
