#!/usr/bin/env bash
# Session 55, run 2: refused too ("too little device-machine time is left"), never run. Run 1
# (build on the device, then everything) no longer fit the device time left, so this one carries
# cuda_ops_test and cuda_kernel_bench built here (sm_90a, the tree with wg_nt48.diff applied:
# 16 / 32 / 48 / 64 tokens a pass from 12 tokens), stripped, in .devcarry/bin/n48.tar.xz, and
# only checks and times them: CudaQuantGemm.* and CudaInt4Tiles8.*
# (the 48-token pass's first run: the "slab wg" entry and the default plan at 33 and 47 tokens), and
# the int4 kernel table for gate and down (its CHECK rows: every kernel against the dequantized
# reference at m = 4..64; its timings: mma.sync against the warpgroup kernel at m = 9..64).
# The tarball (not in the repository; .devcarry is ignored): git apply wg_nt48.diff, build
# cuda_ops_test and cuda_kernel_bench with -DCMAKE_CUDA_ARCHITECTURES=90a, strip both to
# cuda_ops_test.s / cuda_kernel_bench.s, tar cJf .devcarry/bin/n48.tar.xz (38.5 MB).
# Run as: run(command: "bash docs/perf/data/2026-12-06-session55/run2.sh", carry: [".devcarry"])
set -uo pipefail
START=$SECONDS
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
tar xJf .devcarry/bin/n48.tar.xz -C /tmp && echo "unpacked ($((SECONDS-START)) s)" >>$S
(timeout 120 /tmp/cuda_ops_test.s --gtest_filter='CudaQuantGemm.*:CudaInt4Tiles8.*' >$OUT/ops.log 2>&1
 echo "ops tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|PASSED|Failure" $OUT/ops.log | head -8 >>$S
for sh in gate down; do
  (FRUGAL_QBENCH_ONLY="int4g128 $sh" timeout 40 /tmp/cuda_kernel_bench.s --quant >$OUT/qb_$sh.log 2>&1
   echo "qbench $sh rc $? ($((SECONDS-START)) s)" >>$S)
  echo "CHECK ok: $(grep CHECK $OUT/qb_$sh.log | grep -c ok)" >>$S
  grep CHECK $OUT/qb_$sh.log | grep FAIL | head -4 >>$S
  grep -E "qgemm-(slab2ch|slabwg) m=(9|12|16|32|40|48|64) int4g128" $OUT/qb_$sh.log >>$S
done
cat $S
