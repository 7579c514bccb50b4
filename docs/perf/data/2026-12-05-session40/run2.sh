#!/usr/bin/env bash
# Session 40's device call 2, run in session 41 on a fresh machine after the lean GEMV became the
# default, in order of need, each step only while time is left (STOP): build; ctest -L cuda on
# the whole tree (not run since session 38); Nsight Compute on the slab GEMM (issue 18.3); the
# GEMV shapes on the small q matrix; int8 and fp8 batch 1 through the tile GEMV against the (now
# default) lean one; the traces of 7B int4 and bf16 at 16 sequences, int4 at 64, the FP8
# 2048-token prefill and V2-Lite at 256 sequences.
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
[ -x build-gpu/src/cli/frugal ] || build
(cd build-gpu && timeout 260 ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -12 >>$S
# The lean GEMV's early start (its first codes before pdl_wait), off against on (the default).
B1="--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
e2e q7b_int4_b1_noearly /tmp/q7b "FRUGAL_QGEMV_EARLY=0" $B1 --precision int4
e2e q7b_int4_b1_early /tmp/q7b "" $B1 --precision int4
# Why the slab GEMM streams codes at ~1 TB/s at 16..64 tokens (issue 18.3): Nsight Compute on its
# checked launches of the int4 gate (m 4, 9, 16, 33, 64; told apart by grid size), warp states and
# issue slots. Full text in the logs.
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ] && [ $(left) -gt 100 ]; then
  FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 90 "$NCU" -k regex:quant_gemm_slab_kernel -c 24 --kill yes --section SpeedOfLight \
    --section LaunchStats --section Occupancy --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis \
    --metrics $(for r in long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle barrier not_selected selected dispatch_stall no_instruction branch_resolving tex_throttle; do printf "smsp__average_warps_issue_stalled_%s_per_issue_active.ratio," $r; done | sed 's/,$//') \
    build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/ncu_slab.txt 2>&1
  echo "ncu slab rc $? ($((SECONDS-START)) s)" >>$S
  grep -E "^  quant_gemm_slab|Duration|Grid Size|Registers Per|Achieved Occupancy|Issue Slots Busy|Eligible Warps|No Eligible|Warp Cycles Per Issued|DRAM Throughput|L1/TEX Cache Throughput|Dynamic Shared" \
    $L/ncu_slab.txt | head -200 >$OUT/ncu_slab_head.txt
  grep -E "^  quant_gemm_slab|Grid Size|issue_stalled" $L/ncu_slab.txt | head -300 >$OUT/ncu_slab_stalls.txt
fi
# The small GEMVs (qkv, o_proj: 0.8-1.4 TB/s in run 1's trace): the tile and lean GEMVs on the
# q shape (3584 x 3584) at every quads-per-iteration x warps shape.
[ $(left) -gt 40 ] && (FRUGAL_QBENCH_ONLY="int4g128 q 3584" timeout $(($(left) - 5)) build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kb_int4_q.txt 2>&1; echo "kbench q rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^qgemv(-lean)? m=(1|8) |FAIL" $L/kb_int4_q.txt | head -24 >>$S
e2e q7b_int8_b1_tile /tmp/q7b "FRUGAL_QGEMV_KERNEL=tile" $B1 --precision int8
e2e q7b_int8_b1_lean /tmp/q7b "" $B1 --precision int8
e2e q7b_fp8ch_b1_tile /tmp/q7b "FRUGAL_QGEMV_KERNEL=tile" $B1 --precision fp8-channel
e2e q7b_fp8ch_b1_lean /tmp/q7b "" $B1 --precision fp8-channel
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 1 --warmup 1"
trace q7b_int4_b16 /tmp/q7b "" $B --batches 16 --precision int4
trace q7b_bf16_b16 /tmp/q7b "" $B --batches 16
trace q7b_int4_b64 /tmp/q7b "" $B --batches 64 --precision int4
trace q7b_fp8ch_p2048 /tmp/q7b "" --prefill-lens 2048 --reps 1 --warmup 1 --batches 0 --precision fp8-channel
trace v2l_b256 /tmp/v2l "" --prefill-lens 0 --batches 256 --decode-prompt-len 128 --decode-tokens 64 --reps 1 --warmup 1
finish 2
