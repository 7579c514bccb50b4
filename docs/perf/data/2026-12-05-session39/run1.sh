#!/usr/bin/env bash
# Session 39, device call 1: the bulk (TMA-fed) quantized GEMV of quant_gemv_bulk.cu, its tests,
# kernel rows and batch-1 lines against the tile GEMV; FP8 W8A8 with cuBLASLt's fast
# accumulation (FRUGAL_FP8_FAST_ACCUM=1) against the default, its tests and the 18.4 lines.
# Uses session 38's lib.sh (build, e2e, finish); STOP 570 s.
export STOP=${STOP:-570}
source docs/perf/data/2026-12-05-session38/lib.sh
S=$OUT/s1.txt
build
T=build-gpu/tests/cuda
(timeout 150 $T/cuda_ops_test --gtest_filter='CudaQuantGemv.*' >$L/qgemv.log 2>&1; echo "qgemv test rc $? ($((SECONDS-START)) s)" >>$S)
grep -hE "FAILED|tests from|PASSED" $L/qgemv.log | head -5 >>$S
grep -hE "Failure" -A4 $L/qgemv.log | head -24 >>$S
for sh in "int4g128 gate" "int4g128 down" "int4g128 q 3584"; do
  FRUGAL_QBENCH_ONLY="$sh" timeout 45 $T/cuda_kernel_bench --quant >"$L/kbench_${sh// /_}.txt" 2>&1
done
echo "kbench ($((SECONDS-START)) s)" >>$S
grep -hE "qgemv(-bulk)? m=(1|2|4|8) |CHECK.*bulk|FAIL" $L/kbench_int4g128_*.txt | head -60 >>$S
B1=(--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2)
e2e q7b_int4_b1_tile /tmp/q7b "FRUGAL_QGEMV_KERNEL=tile" "${B1[@]}" --precision int4
e2e q7b_int4_b1_bulk /tmp/q7b "FRUGAL_QGEMV_KERNEL=bulk" "${B1[@]}" --precision int4
P2K=(--prefill-lens 2048 --reps 3 --warmup 1 --batches 0 --precision fp8-channel)
e2e q7b_p2k_base /tmp/q7b "FRUGAL_X=1" "${P2K[@]}"
e2e q7b_p2k_fast /tmp/q7b "FRUGAL_FP8_FAST_ACCUM=1" "${P2K[@]}"
(FRUGAL_FP8_FAST_ACCUM=1 timeout 60 $T/cuda_ops_test --gtest_filter='CudaW8a8.*' >$L/w8a8_fast.log 2>&1; echo "w8a8 fast-accum tests rc $?" >>$S)
grep -hE "Failure" -A4 $L/w8a8_fast.log | head -12 >>$S
e2e q7b_int8_b1_tile /tmp/q7b "FRUGAL_QGEMV_KERNEL=tile" "${B1[@]}" --precision int8
e2e q7b_int8_b1_bulk /tmp/q7b "FRUGAL_QGEMV_KERNEL=bulk" "${B1[@]}" --precision int8
e2e q7b_fp8_b1_bulk /tmp/q7b "FRUGAL_QGEMV_KERNEL=bulk" "${B1[@]}" --precision fp8-channel
(FRUGAL_QGEMV_KERNEL=bulk timeout 60 $T/cuda_quant_model_test >$L/qmodel_bulk.log 2>&1; echo "quant model (bulk) rc $?" >>$S)
grep -hE "Failure" -A4 $L/qmodel_bulk.log | head -12 >>$S
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --max-num-batched-tokens 8192 --throughput-reps 1)
e2e q7b_tp_fp8_fast /tmp/q7b "FRUGAL_FP8_FAST_ACCUM=1" "${TP[@]}" --precision fp8-channel
e2e q7b_tp_fp8_base /tmp/q7b "FRUGAL_X=1" "${TP[@]}" --precision fp8-channel
finish 1
