#!/usr/bin/env bash
# Session 51, run 1: the slab GEMM's x reads from two lane bases (x_frag's XOR rebuilt from the
# thread index was ~27 instructions a quad in session 50's SASS), the live token tiles once, two
# batches an iteration (no va / vb copies), and session 50's row pointers for the two-row-tile
# kernels (row_ptrs_r2.diff), against the tree without them (copied first), both built here.
# 1. CudaInt4Tiles8.* and CudaQuantGemm.* on the new tree.
# 2. Kernel rows (int4 gate slab at m = 16 / 32 / 64) and 7B int4 / int8 at 16 and int4 at 64
#    sequences, A/B; the SASS of both int4 objects.
# 3. On an H200: the issue points.
# Run as: run(command: "STOP=515 bash docs/perf/data/2026-12-06-session51/run1.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
source docs/perf/data/2026-12-06-session50/ab.sh
S=$OUT/s1.txt
D=docs/perf/data/2026-12-06-session51
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
copy_tree
patch -p1 <$D/xaddr.diff >>$S 2>&1 && patch -p1 <docs/perf/data/2026-12-06-session50/row_ptrs_r2.diff >>$S 2>&1 || { echo "patch failed" >>$S; finish 1; exit 0; }
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build; unset TARGETS
build_old "frugal cuda_kernel_bench"
quant_tests
kbench_ab "qgemm-slab2ch m=(16|32|64) "
for v in new old; do
  bin=build-gpu; [ $v = old ] && bin=/tmp/old/build-gpu
  cuobjdump -sass $bin/src/backend/cuda/CMakeFiles/frugal_backend_cuda.dir/quant_gemm_slab_int4.cu.o 2>/dev/null | gzip >$OUT/slab_int4_$v.sass.gz
done
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
for prec in int4 int8; do
  e2eb ${prec}_b16_new build-gpu $B --batches 16 --precision $prec
  e2eb ${prec}_b16_old /tmp/old/build-gpu $B --batches 16 --precision $prec
done
e2eb int4_b64_new build-gpu $B --batches 64 --precision int4
e2eb int4_b64_old /tmp/old/build-gpu $B --batches 64 --precision int4
if grep -q H200 $S; then
  B1="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
  e2eb int4_b1 build-gpu $B1 --batches 1 --precision int4
  e2eb bf16_b16 build-gpu $B --batches 16
fi
finish 1
