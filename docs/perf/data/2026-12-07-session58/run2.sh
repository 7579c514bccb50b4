#!/usr/bin/env bash
# Session 58, run 2 (built then, run as session 59's run 1: docs/perf/data/2026-12-07-session59/run1/). Issue 19.3:
# where the persistent MLA kernel's ~33 us a layer go, in the model, and the sequence's trace on
# the same tree and card (run 1 compared the kernel's layer split against session 50's trace).
# 1. CudaFused.MlaAttention* (now also: the stamped instance's bits, the stamps' order and the
#    barrier property), with its per-context stamp lines.
# 2. V2-Lite batch 1 (128 in / 256 out): the sequence and the kernel twice each, then the kernel
#    with FRUGAL_MLA_ATTN_STAMPS=4096 (the step medians over the last 4,096 launches, in the model:
#    the PDL wait, each step from the previous barrier's release to its last arrival, the spread
#    of the arrivals, each barrier's own time).
# 3. The tiny MoE down kernel with h staged in shared memory (FRUGAL_MOE_TINY_STAGE=1, built
#    here, not run): CudaMoe.* (its bits against the unstaged kernel's), cuda_kernel_bench --moe
#    (V2-Lite 1 / 2 tokens, staged and not), V2-Lite batch 1 with it, twice.
# 4. Kernel traces of the sequence and the kernel, split by
#    docs/perf/data/2026-12-07-session58/layer_split.py.
# 5. The op harness's mla_attention cases with the kernel on; Nsight Compute's stall samples by
#    source line of one launch, where time is left.
# Run as: run(command: "STOP=480 bash docs/perf/data/2026-12-07-session58/run2.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
D=docs/perf/data/2026-12-07-session58
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_harness_test cuda_kernel_bench"; build; unset TARGETS
(timeout 90 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaFused.MlaAttention*' >$L/fused_mla.log 2>&1
 echo "fused_mla: rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^\[  (PASSED|FAILED) |Failure$|after the wait" -A1 $L/fused_mla.log | head -30 >>$S
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
ab() { # name env
  local l=$(left); [ $l -gt 30 ] || { echo "$1: no time" >>$S; return; }
  env $2 timeout 75 build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights /tmp/v2l/config.json $V --batches 1 --json $L/$1.json >$L/$1.txt 2>&1
  echo "== $1 rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|engine:|mla_attention stamps|^  " $L/$1.txt | grep -v "^  kernel" | tail -9 >>$S
}
for i in 1 2; do
  ab v2l_b1_seq_$i FRUGAL_FUSE_MLA_ATTN=0
  ab v2l_b1_kernel_$i FRUGAL_FUSE_MLA_ATTN=1
done
ab v2l_b1_stamps "FRUGAL_FUSE_MLA_ATTN=1 FRUGAL_MLA_ATTN_STAMPS=4096"
(timeout 60 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaMoe.*' >$L/moe_tests.log 2>&1
 echo "CudaMoe.*: rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^\[  (PASSED|FAILED) |staged: other bits|Failure$" $L/moe_tests.log | head -8 >>$S
(timeout 40 build-gpu/tests/cuda/cuda_kernel_bench --moe >$L/moe_bench.log 2>&1
 echo "kernel bench --moe: rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "moe_experts v2-lite (1|2) tok" $L/moe_bench.log | head -12 >>$S
for i in 1 2; do ab v2l_b1_moe_staged_$i FRUGAL_MOE_TINY_STAGE=1; done
[ $(left) -gt 45 ] && trace v2l_b1_seq_tr /tmp/v2l "FRUGAL_FUSE_MLA_ATTN=0" $V --batches 1
[ $(left) -gt 45 ] && trace v2l_b1_kernel_tr /tmp/v2l "FRUGAL_FUSE_MLA_ATTN=1" $V --batches 1
for t in $L/trace_v2l_b1_seq_tr/decode_b1.trace.json $L/trace_v2l_b1_kernel_tr/decode_b1.trace.json; do
  [ -f $t ] && python3 $D/layer_split.py $t >>$S 2>&1
done
(l=$(left); [ $l -gt 40 ] && FRUGAL_FUSE_MLA_ATTN=1 timeout $((l-5)) build-gpu/tests/cuda/cuda_harness_test --gtest_filter='*MlaAttention*' >$L/harness.log 2>&1
 echo "harness: rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^\[  (PASSED|FAILED) |cases ran|Failure$" $L/harness.log 2>/dev/null | head -8 >>$S
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ $(left) -gt 100 ] && [ -n "$NCU" ]; then
  (timeout $(( $(left) - 20 )) $NCU --clock-control none -k regex:mla_attention_kernel --launch-skip 8 --launch-count 1 \
     --section SourceCounters --section WarpStateStats --section SpeedOfLight \
     -o $L/mla -f build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaFused.MlaAttention*' >$L/ncu_run.log 2>&1
   echo "ncu rc $? ($((SECONDS-START)) s)" >>$S)
  $NCU -i $L/mla.ncu-rep --page details >$L/mla_details.txt 2>&1
  grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued|stall" $L/mla_details.txt | head -12 >>$S
  $NCU -i $L/mla.ncu-rep --page source --csv --print-source cuda 2>/dev/null | gzip -c >$OUT/mla_source_cuda.csv.gz
fi
finish 2
