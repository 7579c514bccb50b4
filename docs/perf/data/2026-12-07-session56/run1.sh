#!/usr/bin/env bash
# Session 56, run 1 (STOP=560, carry [".devcarry"]). Part A: the tree with session 55's
# wg_nt48.diff (the warpgroup kernel from 12 tokens, 16 / 32 / 48 / 64 tokens a pass; the 48-token
# pass never ran before): its tests, the int4 kernel table, 7B int4 and bf16 at 16 and 64
# sequences (issue 18.3's points, bf16 the same machine's baseline), int4 at 32 / 40 / 48.
# Part B: wg_halves.diff on top (the quads as a software pipeline of half-quads: each half's codes
# dequantized while the half before it multiplies; no serialization warning from ptxas, 128 / 164-169
# / 180-190 / 198-206 registers at 16 / 32 / 48 / 64 tokens a pass, no spills): tests, kernel
# table, 7B int4 at 16 / 32 / 64. Part C: wg_2ch.diff on A's tree (two wgmma chains a quad).
# Nsight Compute on A's 16-token pass. Then session 55's remaining variants alone on A's tree
# while time is left.
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
D5=docs/perf/data/2026-12-06-session55
D=docs/perf/data/2026-12-07-session56
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
git apply $D5/wg_nt48.diff && echo "wg_nt48.diff applied" >>$S
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build
ops() { # tag
  (timeout 200 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantGemm.*:CudaInt4Tiles8.*:CudaFused.*' >$L/ops_$1.log 2>&1
   echo "$1: ops tests rc $? ($((SECONDS-START)) s)" >>$S)
  grep -E "FAILED|PASSED" $L/ops_$1.log | head -8 >>$S
  grep -B2 -A8 "Failure" $L/ops_$1.log | head -24 >>$S
}
qb() { # tag
  (FRUGAL_QBENCH_ONLY="int4g128" timeout 90 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/qb_$1.log 2>&1
   echo "$1: qbench rc $? ($((SECONDS-START)) s)" >>$S)
  grep CHECK $L/qb_$1.log | grep -c ok >>$S
  grep CHECK $L/qb_$1.log | grep FAIL | head -4 >>$S
  grep -E "qgemm-(slab2ch|slabwg) m=(9|12|16|32|40|48|64) int4g128 (gate|down)" $L/qb_$1.log >>$S
}
ops A; qb A
for n in 16 64; do e2e A_int4_b$n /tmp/q7b "" $B --batches $n --precision int4; e2e A_bf16_b$n /tmp/q7b "" $B --batches $n; done
e2e A_int4_b48 /tmp/q7b "" $B --batches 48 --precision int4
e2e A_int4_b40 /tmp/q7b "" $B --batches 40 --precision int4
e2e A_int4_b40_mma /tmp/q7b "FRUGAL_QSLAB_WG=0" $B --batches 40 --precision int4
e2e A_int4_b32 /tmp/q7b "" $B --batches 32 --precision int4
# Part B: the half-quad pipeline.
git apply $D/wg_halves.diff && echo "wg_halves.diff applied" >>$S && build
ops B; qb B
for n in 16 32 64; do e2e B_int4_b$n /tmp/q7b "" $B --batches $n --precision int4; done
e2e B_int4_b48 /tmp/q7b "" $B --batches 48 --precision int4
git apply -R $D/wg_halves.diff
# Part C: wg_2ch.diff on A's tree (each quad's 8 k16 steps as two chains of 4 into two
# accumulators, even / odd steps: 127-128 / 158-168 / 192-195 / 226-227 registers, no spills).
if [ $(left) -gt 70 ] && git apply $D/wg_2ch.diff; then
  echo "wg_2ch.diff applied" >>$S; build; qb C
  for n in 16 64; do e2e C_2ch_int4_b$n /tmp/q7b "" $B --batches $n --precision int4; done
  git apply -R $D/wg_2ch.diff; build
fi
# Nsight Compute on the 16-token pass of A's tree (after C is reverted).
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ $(left) -gt 80 ] && [ -n "$NCU" ]; then
  (FRUGAL_QBENCH_ONLY="int4g128 gate" timeout $(( $(left) - 40 )) $NCU --clock-control none --kernel-name-base mangled \
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
  git apply $D5/wg_$1.diff || { echo "$1: does not apply" >>$S; return; }
  echo "== variant $1" >>$S; build
  (FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 40 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/qb_$1.log 2>&1
   echo "$1: qbench rc $? ($((SECONDS-START)) s)" >>$S)
  grep CHECK $L/qb_$1.log | grep -c ok >>$S
  grep CHECK $L/qb_$1.log | grep FAIL | head -4 >>$S
  grep -E "qgemm-slabwg m=(16|32|48|64) int4g128 gate" $L/qb_$1.log >>$S
  local v=$1; shift
  for n in "$@"; do e2e D_${v}_b$n /tmp/q7b "" $B --batches $n --precision int4; done
  git apply -R $D5/wg_$v.diff
}
[ $(left) -gt 60 ] && variant nt32x2 32
for v in stores stage sums pingpong; do [ $(left) -gt 60 ] && variant $v 16 64; done
finish 1
