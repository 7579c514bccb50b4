#!/usr/bin/env bash
# Session 57, run 1 (run as session 59's run 2: docs/perf/data/2026-12-07-session59/run2/; never started then: every start this session was refused until run 2, which took
# the one machine that came; STOP=560 with a whole budget). Session 56's run3.sh with bf16 at
# 16 / 64 sequences after the int4 baseline (18.3 needs both on the card that ran; an H200 has not
# run the final kernel). Run 2 of session 57 ran the landed tree's op tests and the 16 / 64 points
# already; what is left here is the three variants. The tree as landed in 52bd6e3 (48-token pass, staging hoist, two
# blocks an SM at 32): its op tests (what run 2 was to check), then 7B int4 at 16 / 64 sequences
# as the baseline. Then three variants, each alone on that tree: its build, the gate's kernel
# table (checked against the reference kernel), 7B int4 at 16 / 64 (32 too where time is left):
#  - wg_scales.diff: each batch's group scales (and zero points) loaded with its codes, one
#    batch ahead (run 1's Nsight Compute: the fold's FFMAs waited on these loads for 14% of the
#    samples; 128 registers at 16 / 32 tokens a pass with 16 / 24 bytes of spills with zero
#    points, 167-191 at 48 / 64);
#  - wg_early2.diff: the second batch's codes requested before the PDL wait too, so they are in
#    flight during the x staging (11% of the samples), no spills;
#  - wg_scales_early2.diff: both.
# Then the op tests of the fastest variant.
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
D=docs/perf/data/2026-12-07-session56  # the diffs
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build
ops() { # tag filter timeout
  (timeout $3 build-gpu/tests/cuda/cuda_ops_test --gtest_filter="$2" >$L/ops_$1.log 2>&1
   echo "$1: ops tests rc $? ($((SECONDS-START)) s)" >>$S)
  grep -E "FAILED|PASSED" $L/ops_$1.log | head -8 >>$S
  grep -B2 -A8 "Failure" $L/ops_$1.log | head -24 >>$S
}
ops landed 'CudaQuantGemm.*:CudaInt4Tiles8.*:CudaFused.*' 150
(FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 40 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/qb_landed.log 2>&1
 echo "landed: qbench rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "qgemm-slabwg m=(16|32|48|64) int4g128 gate" $L/qb_landed.log | head -4 >>$S
for n in 16 64; do e2e H_int4_b$n /tmp/q7b "" $B --batches $n --precision int4; e2e H_bf16_b$n /tmp/q7b "" $B --batches $n; done
e2e H_int4_b32 /tmp/q7b "" $B --batches 32 --precision int4
variant() { # name
  git apply $D/wg_$1.diff || { echo "$1: does not apply" >>$S; return; }
  echo "== variant $1" >>$S; build
  (FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 40 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/qb_$1.log 2>&1
   echo "$1: qbench rc $? ($((SECONDS-START)) s)" >>$S)
  grep CHECK $L/qb_$1.log | grep -c ok >>$S
  grep CHECK $L/qb_$1.log | grep FAIL | head -4 >>$S
  grep -E "qgemm-slabwg m=(16|32|48|64) int4g128 gate" $L/qb_$1.log | head -4 >>$S
  for n in 16 64; do e2e V_$1_b$n /tmp/q7b "" $B --batches $n --precision int4; done
  git apply -R $D/wg_$1.diff
}
for v in scales early2 scales_early2; do [ $(left) -gt 60 ] && variant $v; done
# The op tests of the variant with the fastest 16-sequence point (its diff applied again).
best=$(for v in scales early2 scales_early2; do f=$L/V_${v}_b16.txt; [ -f $f ] && echo "$(grep -E '^decode' $f | awk '{print $3}') $v"; done | sort -rn | head -1 | awk '{print $2}')
if [ -n "$best" ] && [ $(left) -gt 100 ] && git apply $D/wg_$best.diff; then
  echo "== op tests of $best" >>$S; build; ops $best 'CudaQuantGemm.*:CudaInt4Tiles8.*' $(( $(left) - 5 ))
  for n in 32; do e2e V_${best}_b$n /tmp/q7b "" $B --batches $n --precision int4; done
fi
finish 1
