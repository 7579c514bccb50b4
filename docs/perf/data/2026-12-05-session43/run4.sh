#!/usr/bin/env bash
# Session 43, device call 4 (a fresh machine; what the remaining device time allows): the int4
# dequantization with each mma step's two x words adjacent and one lop3 a pair, and the lean
# GEMV's scale / zero-point addresses as 32-bit offsets (SASS of run 1's machine: 235
# instructions a quad, 32 of them register moves for the mma's B operand, 32 unfused and-or
# pairs, ~20 address rebuilds). Its tests (every quantized kernel, the harness's matmuls on
# three CUDA instances, the AWQ / GPTQ fixtures against transformers), its kernel rows and 7B
# decode at 1, 16 and 64 sequences, against run 1 / run 2 of this session (H100s).
# Run as: run(command: "bash docs/perf/data/2026-12-05-session43/run4.sh", carry: [".devcarry"]).
STOP=${STOP:-400}
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s4.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_harness_test cuda_quant_model_test cuda_kernel_bench"; build; unset TARGETS
t() { # name timeout binary filter
  (timeout $2 build-gpu/tests/cuda/$3 --gtest_filter="$4" >$L/$1.log 2>&1; echo "$1 rc $? ($((SECONDS-START)) s)" >>$S)
  grep -E "FAILED|Failure|PASSED" $L/$1.log | head -6 >>$S
}
t ops 120 cuda_ops_test 'CudaQuant*:CudaMoe.*Quantized*:CudaW8a8.*'
t harness 90 cuda_harness_test '*Matmul*'
t fixtures 60 cuda_quant_model_test '*'
(FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 60 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kb_gate.txt 2>&1; echo "kbench gate rc $?" >>$S)
grep -E "CHECK|FAIL" $L/kb_gate.txt | grep -v " ok" | head -3 >>$S
grep -E "^qgemv-lean m=[18] .* l2 0|^qgemm-slab2ch m=(16|64) " $L/kb_gate.txt | head -6 >>$S
B1="--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
e2e q7b_int4_b1 /tmp/q7b "" $B1 --precision int4
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e q7b_int4_b16 /tmp/q7b "" $B --batches 16 --precision int4
e2e q7b_int4_b64 /tmp/q7b "" $B --batches 64 --precision int4
e2e q7b_int8_b1 /tmp/q7b "" $B1 --precision int8
e2e q7b_fp8ch_b1 /tmp/q7b "" $B1 --precision fp8-channel
e2e q7b_int4_b1_again /tmp/q7b "" $B1 --precision int4
finish 4
