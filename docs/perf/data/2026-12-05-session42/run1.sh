#!/usr/bin/env bash
# Session 42, device call 1: session 41's run3 (the slab GEMM's two mma chains against one:
# correctness, kernel rows, 7B int4 at 16 and 64 sequences against bf16), then the batch-1 points
# of issues 18.2 and 19.3 on this machine (the lean GEMV with its early start is the default).
# Run as: run(command: "bash docs/perf/data/2026-12-05-session42/run1.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_harness_test cuda_kernel_bench"; build; unset TARGETS
# Issue 18.4 at the peers' batch sizes: the same 1000 x 128/128 run with 256 (as every session
# since 35) and with 1024 running sequences (vLLM's default on 80+ GB GPUs; TensorRT-LLM's
# benchmark sizes its batch to the memory), FP8 per-channel, then bf16 at 1024.
T="--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-batched-tokens 8192 --throughput-reps 1"
e2e fp8_tput_256 /tmp/q7b "" $T --max-num-seqs 256 --precision fp8-channel
e2e fp8_tput_1024 /tmp/q7b "" $T --max-num-seqs 1024 --precision fp8-channel
e2e fp8_tput_1024_16k /tmp/q7b "" ${T/8192/16384} --max-num-seqs 1024 --precision fp8-channel
e2e bf16_tput_1024 /tmp/q7b "" $T --max-num-seqs 1024
(timeout 150 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantGemm.*:CudaOps.MoeRoute*' >$L/qgemm.log 2>&1; echo "CudaQuantGemm + MoeRoute rc $?" >>$S)
grep -E "FAILED|Failure|PASSED" $L/qgemm.log | head -6 >>$S
(timeout 60 build-gpu/tests/cuda/cuda_harness_test --gtest_filter='*MoeRoute*' >$L/route_h.log 2>&1; echo "harness MoeRoute* rc $?" >>$S)
grep -E "FAILED|Failure|PASSED" $L/route_h.log | head -6 >>$S
(FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 120 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kb_gate.txt 2>&1; echo "kbench gate rc $?" >>$S)
grep -E "^qgemm-slab(2ch)? m=|FAIL" $L/kb_gate.txt | grep -v " u[24]r1 " | head -30 >>$S
B1="--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
e2e v2l_b1 /tmp/v2l "" $B1
e2e v2l_b1_rounds /tmp/v2l "FRUGAL_MOE_ROUTE_RANK=0" $B1
trace v2l_b1 /tmp/v2l "" $B1
e2e q7b_int4_b1 /tmp/q7b "" $B1 --precision int4
e2e q7b_int8_b1 /tmp/q7b "" $B1 --precision int8
e2e q7b_fp8ch_b1 /tmp/q7b "" $B1 --precision fp8-channel
e2e q7b_bf16_b1 /tmp/q7b "" $B1
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e q7b_int4_b16_ch1 /tmp/q7b "" $B --batches 16 --precision int4
e2e q7b_int4_b16_ch2 /tmp/q7b "FRUGAL_QSLAB_CHAINS=2" $B --batches 16 --precision int4
e2e q7b_bf16_b16 /tmp/q7b "" $B --batches 16
e2e q7b_int4_b64_ch1 /tmp/q7b "" $B --batches 64 --precision int4
e2e q7b_int4_b64_ch2 /tmp/q7b "FRUGAL_QSLAB_CHAINS=2" $B --batches 64 --precision int4
e2e q7b_bf16_b64 /tmp/q7b "" $B --batches 64
finish 1
