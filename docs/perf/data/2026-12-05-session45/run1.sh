#!/usr/bin/env bash
# Session 45, first device call: session 44's run1.sh without the fixture step (the two "_lmhead"
# fixtures came back from this session's first call, which stopped at configure: the new checkout
# lacked .devcarry/debs, and are now in tests/data/quant). Builds frugal and the CUDA tests, runs
# CudaQuantMatmul/Gemm and cuda_quant_model_test (the _lmhead fixtures on CUDA), the tile-major
# lean GEMV rows, and 7B int4 decode with the dummy lm_head in bf16 and in int8.
# Run as: run(command: "bash docs/perf/data/2026-12-05-session45/run1.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_quant_model_test cuda_kernel_bench"; build; unset TARGETS
(timeout 120 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantMatmul.*:CudaQuantGemm.*' >$L/qm.log 2>&1
  echo "CudaQuantMatmul/Gemm rc $?" >>$S)
grep -E "FAILED|Failure|PASSED|OK \]" $L/qm.log | head -12 >>$S
(timeout 120 build-gpu/tests/cuda/cuda_quant_model_test >$L/qmodel.log 2>&1; echo "cuda_quant_model_test rc $?" >>$S)
grep -E "FAILED|PASSED|lmhead" $L/qmodel.log | head -10 >>$S
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
