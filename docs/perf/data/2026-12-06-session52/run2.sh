#!/usr/bin/env bash
# Session 52, run 2: the split GEMM's epilogues (matmul_rms_norm / matmul_silu_mul / matmul_rope_kv_write add the slab
# GEMM's k-slice partials in the norm's / SwiGLU's own kernel: no reduce kernel), one build, A/B by
# FRUGAL_FUSE_SPLIT.
# 1. CudaFused.* (SplitEpiloguesEqualReduceThenOp: bit for bit against reduce then op, eager and
#    from a graph), CudaQuantGemm.* (the slab launch without its reduce), the op harness's
#    matmul_rms_norm / matmul_silu_mul / rms_norm / quantized matmul, the goldens and the
#    quantized checkpoints end to end on the GPU (the Llama family's new norm placement).
# 2. 7B int4 / int8 at 16 sequences and int4 at 64 (512-token prompts), both ways; bf16 at 16 (18.3's
#    ratio on the same card); int4 batch 1; int4 at 16 both ways again, the quantized GEMM tests and the
#    quantized checkpoints if time is left.
# Run as: run(command: "STOP=540 bash docs/perf/data/2026-12-06-session52/run2.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_harness_test cuda_golden_test cuda_quant_model_test"; build; unset TARGETS
(timeout 120 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaFused.*' >$L/ops.log 2>&1
 echo "ops tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|differ|did not run|one slice" $L/ops.log | head -12 >>$S
(timeout 120 build-gpu/tests/cuda/cuda_harness_test --gtest_filter='*MatmulRmsNorm*:*MatmulSiluMul*:*OpHarness.RmsNorm*:*MatmulQuant*:*RopeKvWrite*' >$L/harness.log 2>&1
 echo "harness rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|cases ran" $L/harness.log | head -14 >>$S
(timeout 90 build-gpu/tests/cuda_golden/cuda_golden_test >$L/golden.log 2>&1; echo "golden rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED" $L/golden.log | head -8 >>$S
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
B1="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
e2e int4_b16_s1 /tmp/q7b "FRUGAL_FUSE_SPLIT=1" $B --batches 16 --precision int4
e2e int4_b16_s0 /tmp/q7b "FRUGAL_FUSE_SPLIT=0" $B --batches 16 --precision int4
e2e int8_b16_s1 /tmp/q7b "FRUGAL_FUSE_SPLIT=1" $B --batches 16 --precision int8
e2e int8_b16_s0 /tmp/q7b "FRUGAL_FUSE_SPLIT=0" $B --batches 16 --precision int8
e2e int4_b64_s1 /tmp/q7b "FRUGAL_FUSE_SPLIT=1" $B --batches 64 --precision int4
e2e int4_b64_s0 /tmp/q7b "FRUGAL_FUSE_SPLIT=0" $B --batches 64 --precision int4
e2e bf16_b16 /tmp/q7b "" $B --batches 16
e2e int4_b1 /tmp/q7b "" $B1 --batches 1 --precision int4
e2e int4_b16_s1b /tmp/q7b "FRUGAL_FUSE_SPLIT=1" $B --batches 16 --precision int4
e2e int4_b16_s0b /tmp/q7b "FRUGAL_FUSE_SPLIT=0" $B --batches 16 --precision int4
# Last, where time is left: the quantized GEMMs called directly (the slab launch's reduce flag) and
# the quantized checkpoints end to end.
(l=$(left); [ $l -gt 60 ] && timeout $((l-5)) build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantGemm.*' >$L/qgemm.log 2>&1
 echo "quant gemm tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED" $L/qgemm.log 2>/dev/null | head -6 >>$S
(l=$(left); [ $l -gt 30 ] && timeout $((l-5)) build-gpu/tests/cuda/cuda_quant_model_test >$L/qmodel.log 2>&1
 echo "quant model rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED" $L/qmodel.log 2>/dev/null | head -6 >>$S
finish 2
