#!/usr/bin/env bash
# Session 44 (no device time: the session's budget was spent before it began), for the next
# device call. What this session built and could not run:
#   - the quantized lm_head: scripts/gpu/quant_fixtures.py --only makes the two "_lmhead"
#     fixtures (GPTQ w4 g128 with "lm_head": true, compressed-tensors int8 without lm_head in
#     "ignore") against transformers; they are then loaded by cuda_quant_model_test (CUDA, bf16)
#     here, and their tarball comes back for tests/data/quant/ (model_quant_test runs them on
#     the CPU in CI);
#   - CudaBackend::matmul_dequant_lt's row slices (CudaQuantMatmul.*) and the quantized GEMMs;
#   - the lean GEMV on tile-major int4 codes (launch_quant_gemv_lean_tile_major: each warp load
#     512 contiguous bytes), checked bit for bit against the lean GEMV and timed beside it on the
#     gate (the "qgemv-lean-tm" rows; with the "qload" rows: does the codes' layout bound it);
#   - 7B int4 batch 1 and 16 with the dummy lm_head in bf16 (the default) and int8
#     (--lm-head int8): what a quantized lm_head buys toward 18.2 / 18.3.
# Run as: run(command: "bash docs/perf/data/2026-12-05-session44/run1.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_quant_model_test cuda_kernel_bench"; build; unset TARGETS
(timeout 200 python3 scripts/gpu/quant_fixtures.py --out $OUT/fx --only gptq_w4g128_lmhead,int8_channel_lmhead \
  --keep-dirs >$L/fx.log 2>&1; echo "fixtures rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "lmhead|Error|error" $L/fx.log | head -6 >>$S
for d in gptq_w4g128_lmhead int8_channel_lmhead; do [ -d $OUT/fx/dirs/$d ] && cp -r $OUT/fx/dirs/$d tests/data/quant/; done
rm -rf $OUT/fx/dirs  # the tarball (quant_fixtures_c.tar.xz) and manifest come back, not the directories
(timeout 120 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantMatmul.*:CudaQuantGemm.*' >$L/qm.log 2>&1
  echo "CudaQuantMatmul/Gemm rc $?" >>$S)
grep -E "FAILED|Failure|PASSED|OK \]" $L/qm.log | head -8 >>$S
(timeout 120 build-gpu/tests/cuda/cuda_quant_model_test >$L/qmodel.log 2>&1; echo "cuda_quant_model_test rc $?" >>$S)
grep -E "FAILED|PASSED|lmhead.*OK" $L/qmodel.log | head -8 >>$S
(FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 90 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kb.txt 2>&1; echo "kbench rc $?" >>$S)
grep -E "^CHECK .*tile-major|^qgemv-lean(-tm)? m=(1|2|4|8) int4g128 gate 18944x3584( u[124]w[48])? +[0-9]|^qload .*us \[" $L/kb.txt >>$S
B1="--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1 --precision int4"
e2e q7b_int4_b1 /tmp/q7b "" $B1
e2e q7b_int4_b1_lmhead8 /tmp/q7b "" $B1 --lm-head int8
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1 --precision int4"
e2e q7b_int4_b16 /tmp/q7b "" $B --batches 16
e2e q7b_int4_b16_lmhead8 /tmp/q7b "" $B --batches 16 --lm-head int8
e2e q7b_int4_b128_lmhead8 /tmp/q7b "" $B --batches 128 --lm-head int8
finish 1
