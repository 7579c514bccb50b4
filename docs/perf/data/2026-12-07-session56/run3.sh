#!/usr/bin/env bash
# Session 56, run 3 (a nearly spent budget: STOP=230 or more). The tree as landed (52bd6e3:
# 48-token pass, staging hoist, two blocks an SM at 32) against wg_scales.diff: each batch's group
# scales (and zero points) loaded with its codes, one batch ahead (run 1's Nsight Compute had the
# fold's FFMAs waiting on these loads for 14% of the samples; 128 registers at 16 / 32 tokens a
# pass with 16 / 24 bytes of spills with zero points, 167-191 at 48 / 64). Baseline 7B int4 at 16 /
# 64 sequences first, after the landed tree's op tests (what run 2 was to check), then the
# variant's build, its kernel table (checked against the reference), the same points, and its op
# tests while time is left.
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s3.txt
D=docs/perf/data/2026-12-07-session56
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build
(timeout 150 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantGemm.*:CudaInt4Tiles8.*' >$L/ops_landed.log 2>&1
 echo "landed tree: ops tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|PASSED" $L/ops_landed.log | head -8 >>$S
for n in 16 64; do e2e H_int4_b$n /tmp/q7b "" $B --batches $n --precision int4; done
git apply $D/wg_scales.diff && echo "wg_scales.diff applied" >>$S && build
(FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 40 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/qb.log 2>&1
 echo "qbench rc $? ($((SECONDS-START)) s)" >>$S)
grep CHECK $L/qb.log | grep -c ok >>$S
grep CHECK $L/qb.log | grep FAIL | head -4 >>$S
grep -E "qgemm-slabwg m=(16|32|48|64) int4g128 gate" $L/qb.log | head -4 >>$S
for n in 16 64 32; do e2e S_int4_b$n /tmp/q7b "" $B --batches $n --precision int4; done
if [ $(left) -gt 80 ]; then
  (timeout $(( $(left) - 5 )) build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantGemm.*:CudaInt4Tiles8.*' >$L/ops.log 2>&1
   echo "ops tests rc $? ($((SECONDS-START)) s)" >>$S)
  grep -E "FAILED|PASSED" $L/ops.log | head -8 >>$S
fi
finish 3
