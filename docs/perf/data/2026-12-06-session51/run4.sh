#!/usr/bin/env bash
# Session 51, run 4: MLA's split merge and W_UV in one kernel (attention_batched_matmul, a fused op;
# mla_combine_uv_kernel), one build, A/B by FRUGAL_FUSE_MLA_UV=0 (the combine kernel, then the
# batched GEMV).
# 1. CudaFused.* (the fused op against attention then batched_matmul, bit for bit, eager and in a
#    graph), CudaAttention.Mla*, CudaBatchedMatmul.*, the op harness's attention and the new op,
#    and the DeepSeek / YaRN goldens on the GPU.
# 2. V2-Lite batch 1 (128 in / 256 out) both ways, twice each, batch 16 both ways, a kernel trace
#    of batch 1 fused.
# Written in session 51, not run (no device time left). Run as:
#   run(command: "STOP=540 bash docs/perf/data/2026-12-06-session51/run4.sh", carry: [".devcarry"])
# Land mla_combine_uv.diff only if every test passes and V2-Lite batch 1 is no slower.
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s4.txt
# The CUDA side of the fused op (the kernel, the backend's override, its bit test, the docs) is
# mla_combine_uv.diff: applied here (built on this machine, never run on a GPU so far).
patch -p1 <docs/perf/data/2026-12-06-session51/mla_combine_uv.diff >>$S 2>&1 || { echo "patch failed" >>$S; finish 4; exit 0; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_harness_test cuda_golden_test"; build; unset TARGETS
(timeout 90 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaFused.*:CudaAttention.Mla*:CudaBatchedMatmul.*' >$L/ops.log 2>&1
 echo "ops tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|differ|did not run" $L/ops.log | head -12 >>$S
(timeout 90 build-gpu/tests/cuda/cuda_harness_test --gtest_filter='*AttentionBatchedMatmul*:*OpHarness.Attention/*:*OpHarness.BatchedMatmul*' >$L/harness.log 2>&1
 echo "harness rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|cases ran" $L/harness.log | head -12 >>$S
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
for i in 1 2; do
  e2e v2l_b1_uv1_$i /tmp/v2l "FRUGAL_FUSE_MLA_UV=1" $V --batches 1
  e2e v2l_b1_uv0_$i /tmp/v2l "FRUGAL_FUSE_MLA_UV=0" $V --batches 1
done
(l=$(left); [ $l -gt 40 ] && timeout $((l-5)) build-gpu/tests/cuda_golden/cuda_golden_test >$L/golden.log 2>&1
 echo "golden rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED" $L/golden.log | head -8 >>$S
e2e v2l_b16_uv1 /tmp/v2l "FRUGAL_FUSE_MLA_UV=1" $V --batches 16
e2e v2l_b16_uv0 /tmp/v2l "FRUGAL_FUSE_MLA_UV=0" $V --batches 16
finish 4
