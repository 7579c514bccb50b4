#!/usr/bin/env bash
# Session 55, run 1: never started (six refused starts spent the session's device time); for the
# next device call, with a whole budget: STOP=560. Part A, the tree with wg_nt48.diff: the warpgroup kernel from 12 tokens with
# 16 / 32 / 48 / 64 tokens a pass (the 48-token pass is new: wgmma n48, never run before this call;
# the tree as committed leaves 33..40 tokens to mma.sync and runs 64 a pass from 41).
# Its tests (CudaQuantGemm.*, CudaInt4Tiles8.*, CudaFused.*), the int4 kernel table (every int4
# shape, mma.sync "slab2ch" against "slabwg" at m = 9..64), 7B int4 and bf16 decode at 12..64
# sequences (bf16 the same machine's baseline), the mma.sync kernel at 40 sequences, and a kernel
# trace of int4 at 16 sequences (where the step goes now). Part B, session 54's run5.diff split
# in its four parts (wg_stage / wg_sums / wg_stores / wg_pingpong.diff) and two blocks an SM for
# the 32-token pass (wg_nt32x2.diff: 127 registers, no spills), each applied alone, rebuilt (one
# object), checked and timed by the kernel table (gate and down) and 7B int4 at 16 / 64 sequences
# (32 for wg_nt32x2). Between the two parts, Nsight Compute on part A's 16-token pass.
# Run as: run(command: "STOP=560 bash docs/perf/data/2026-12-06-session55/run1.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
D=docs/perf/data/2026-12-06-session55
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
git apply $D/wg_nt48.diff && echo "wg_nt48.diff applied" >>$S
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build
(timeout 200 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantGemm.*:CudaInt4Tiles8.*:CudaFused.*' >$L/ops_A.log 2>&1
 echo "A: ops tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|PASSED|Failure" $L/ops_A.log | head -8 >>$S
grep -B2 -A8 "Failure" $L/ops_A.log | head -24 >>$S
(FRUGAL_QBENCH_ONLY="int4g128" timeout 90 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/qb_A.log 2>&1
 echo "A: qbench rc $? ($((SECONDS-START)) s)" >>$S)
grep CHECK $L/qb_A.log | grep -c ok >>$S
grep CHECK $L/qb_A.log | grep FAIL | head -4 >>$S
grep -E "qgemm-(slab2ch|slabwg) m=(9|12|16|32|40|48|64) int4g128 (gate|down)" $L/qb_A.log >>$S
e2e A_int4_b48 /tmp/q7b "" $B --batches 48 --precision int4
e2e A_bf16_b48 /tmp/q7b "" $B --batches 48
e2e A_int4_b40 /tmp/q7b "" $B --batches 40 --precision int4
e2e A_int4_b40_mma /tmp/q7b "FRUGAL_QSLAB_WG=0" $B --batches 40 --precision int4
for n in 16 64; do e2e A_int4_b$n /tmp/q7b "" $B --batches $n --precision int4; e2e A_bf16_b$n /tmp/q7b "" $B --batches $n; done
e2e A_int4_b32 /tmp/q7b "" $B --batches 32 --precision int4
e2e A_int4_b12 /tmp/q7b "" $B --batches 12 --precision int4
e2e A_int4_b12_mma /tmp/q7b "FRUGAL_QSLAB_WG=0" $B --batches 12 --precision int4
trace A_int4_b16_tr /tmp/q7b "" --prefill-lens 0 --decode-prompt-len 512 --decode-tokens 32 --reps 1 --warmup 1 --batches 16 --precision int4
# Nsight Compute on the 16-token pass (gate, m = 9..16 all compute 16 tokens), part A's build
# (the tree with wg_nt48.diff): where 18.3's 16-sequence point loses its time.
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ $(left) -gt 70 ] && [ -n "$NCU" ]; then
  (FRUGAL_QBENCH_ONLY="int4g128 gate" timeout $(( $(left) - 25 )) $NCU --clock-control none --kernel-name-base mangled \
     -k "regex:quant_gemm_wg_kernelILi16" --launch-skip 20 --launch-count 1 --section SourceCounters --section WarpStateStats \
     --section InstructionStats --section SpeedOfLight --section SchedulerStats --section LaunchStats --section Occupancy \
     --section MemoryWorkloadAnalysis --import-source no -o $L/wg16 -f build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/ncu_run.log 2>&1
   echo "ncu rc $? ($((SECONDS-START)) s)" >>$S)
  $NCU -i $L/wg16.ncu-rep --page details >$L/details16.txt 2>&1
  grep -E "Grid Size|Registers Per|Duration|DRAM Throughput|Issued Instructions  |Warp Cycles Per Issued|Eligible Warps|Issued Warp|Stall|stall" $L/details16.txt | head -30 >>$S
  $NCU -i $L/wg16.ncu-rep --page source --csv --print-source sass >$L/source16.csv 2>/dev/null
  gzip -c $L/source16.csv >$OUT/wg16_source.csv.gz; gzip -c $L/details16.txt >$OUT/wg16_details.txt.gz
fi
variant() { # name batches...
  git apply $D/wg_$1.diff || { echo "$1: does not apply" >>$S; return; }
  echo "== variant $1" >>$S; build
  (FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 40 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/qb_$1.log 2>&1
   FRUGAL_QBENCH_ONLY="int4g128 down" timeout 40 build-gpu/tests/cuda/cuda_kernel_bench --quant >>$L/qb_$1.log 2>&1
   echo "$1: qbench rc $? ($((SECONDS-START)) s)" >>$S)
  grep CHECK $L/qb_$1.log | grep -c ok >>$S
  grep CHECK $L/qb_$1.log | grep FAIL | head -4 >>$S
  grep -E "qgemm-slabwg m=(16|32|48|64) int4g128 (gate|down)" $L/qb_$1.log >>$S
  local v=$1; shift
  for n in "$@"; do e2e B_${v}_b$n /tmp/q7b "" $B --batches $n --precision int4; done
  git apply -R $D/wg_$v.diff
}
[ $(left) -gt 60 ] && variant nt32x2 32
for v in stores stage sums pingpong; do [ $(left) -gt 60 ] && variant $v 16 64; done
finish 1
