#!/usr/bin/env bash
# Session 57, run 3 (built here, not run: no device time left). The persistent MLA kernel
# (mla_attention.cu, opt-in) with the changes its accounting in session 57 points to
# (mla_chain.diff):
#  - W_abs rows 8 a warp at once and W_UV rows 2 (warp_dot_rows: every row's chunk of a lane
#    issued before any is used: V2-Lite's ~9 rows a warp are 2 round trips, not 9);
#  - the merge's split loads 8 at a time (the same sums in the same order);
#  - the prologue's block takes no W_abs rows (they are spread over the other G - 1 blocks);
#  - FRUGAL_MLA_ATTN_EARLY=0: the weight copies after the PDL wait, not under the bandwidth-bound
#    MoE kernel before (which lost ~2.4 us a layer in session 57's trace).
# 1. CudaFused.MlaAttention* (within rounding of the sequence, eager, twice and from a graph).
# 2. V2-Lite batch 1 (128 in / 256 out): the sequence, the kernel (early copy), the kernel (late
#    copy), twice each; kernel traces of the faster kernel variant and of the sequence.
# 3. Nsight Compute's stall samples of one launch by source line; the op harness's mla_attention
#    cases with the kernel on (FRUGAL_FUSE_MLA_ATTN=1).
# Land the diff if the test passes and either variant beats session 57's kernel (330.5 tok/s on
# the H100); make the kernel the default only if it beats the sequence.
# Run as: run(command: "STOP=480 bash docs/perf/data/2026-12-07-session57/run3.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s3.txt
D=docs/perf/data/2026-12-07-session57
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
git apply $D/mla_chain.diff || { echo "mla_chain.diff does not apply" >>$S; finish 3; exit 0; }
export TARGETS="frugal cuda_ops_test cuda_harness_test"; build; unset TARGETS
(timeout 90 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaFused.MlaAttention*' >$L/fused_mla.log 2>&1
 echo "fused_mla: rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^\[  (PASSED|FAILED) |Failure$" -A4 $L/fused_mla.log | head -20 >>$S
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
ab() { # name env
  local l=$(left); [ $l -gt 30 ] || { echo "$1: no time" >>$S; return; }
  env $2 timeout 75 build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights /tmp/v2l/config.json $V --batches 1 --json $L/$1.json >$L/$1.txt 2>&1
  echo "== $1 rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|engine:" $L/$1.txt | tail -2 >>$S
}
for i in 1 2; do
  ab v2l_b1_seq_$i FRUGAL_FUSE_MLA_ATTN=0
  ab v2l_b1_early_$i FRUGAL_FUSE_MLA_ATTN=1
  ab v2l_b1_late_$i "FRUGAL_FUSE_MLA_ATTN=1 FRUGAL_MLA_ATTN_EARLY=0"
done
# Nsight Compute on one launch of the kernel (the test's context 256 case), alone: the
# stall samples by source line and SASS (-lineinfo), to split the chain between the steps. The
# test launches the kernel 4 times a context (eager twice, 2 graph replays): launch 9 is context 256.
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ $(left) -gt 150 ] && [ -n "$NCU" ]; then
  (timeout 90 $NCU --clock-control none -k regex:mla_attention_kernel --launch-skip 8 --launch-count 1 \
     --section SourceCounters --section WarpStateStats --section SpeedOfLight --section SchedulerStats \
     -o $L/mla -f build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaFused.MlaAttention*' >$L/ncu_run.log 2>&1
   echo "ncu rc $? ($((SECONDS-START)) s)" >>$S)
  $NCU -i $L/mla.ncu-rep --page details >$L/mla_details.txt 2>&1
  grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued|Eligible Warps|stall" $L/mla_details.txt | head -12 >>$S
  $NCU -i $L/mla.ncu-rep --page source --csv --print-source cuda >$L/mla_source_cuda.csv 2>/dev/null
  $NCU -i $L/mla.ncu-rep --page source --csv --print-source sass >$L/mla_source_sass.csv 2>/dev/null
  for f in mla_details.txt mla_source_cuda.csv mla_source_sass.csv; do [ -s $L/$f ] && gzip -c $L/$f >$OUT/$f.gz; done
fi
rate() { grep -E '^decode' $L/$1.txt 2>/dev/null | awk '{print $3}'; }
best=FRUGAL_MLA_ATTN_EARLY=1
awk -v a="$(rate v2l_b1_late_2)" -v b="$(rate v2l_b1_early_2)" 'BEGIN { exit !(a + 0 > b + 0) }' && best=FRUGAL_MLA_ATTN_EARLY=0
echo "trace with $best" >>$S
[ $(left) -gt 45 ] && trace v2l_b1_tr /tmp/v2l "FRUGAL_FUSE_MLA_ATTN=1 $best" $V --batches 1
# The sequence's trace on the same tree and card (session 57 compared against session 50's, whose
# tiny MoE down kernel was a variant measured 3.3% slower).
[ $(left) -gt 45 ] && trace v2l_b1_seq_tr /tmp/v2l "FRUGAL_FUSE_MLA_ATTN=0" $V --batches 1
(l=$(left); [ $l -gt 30 ] && FRUGAL_FUSE_MLA_ATTN=1 timeout $((l-5)) build-gpu/tests/cuda/cuda_harness_test --gtest_filter='*MlaAttention*' >$L/harness.log 2>&1
 echo "harness: rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^\[  (PASSED|FAILED) |cases ran|Failure$" $L/harness.log | head -8 >>$S
finish 3
