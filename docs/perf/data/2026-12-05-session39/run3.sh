#!/usr/bin/env bash
# Session 39, device call 3 (call 2 was an Nsight Compute look at the bulk GEMV: 181 registers,
# one block of 4 consumer warps an SM, 7.8% occupancy): the bulk GEMV with lean consumers (x and
# scales loaded when used, 72 registers, 8 consumer warps, 3 blocks an SM), its tests, kernel
# rows and batch-1 lines against the tile GEMV; FP8 fast accumulation now the default for
# per-tensor / per-channel scales: its tests (both ways) and the 18.4 lines.
export STOP=${STOP:-480}
source docs/perf/data/2026-12-05-session38/lib.sh
S=$OUT/s3.txt
build
T=build-gpu/tests/cuda
(timeout 150 $T/cuda_ops_test --gtest_filter='CudaQuantGemv.*:CudaW8a8.*' >$L/qgemv_w8a8.log 2>&1; echo "qgemv + w8a8 tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -hE "FAILED|tests from|PASSED" $L/qgemv_w8a8.log | head -5 >>$S
grep -hE "Failure" -A4 $L/qgemv_w8a8.log | head -24 >>$S
for sh in "int4g128 gate" "int4g128 down" "int8 gate" "fp8b128 gate"; do
  FRUGAL_QBENCH_ONLY="$sh" timeout 45 $T/cuda_kernel_bench --quant >"$L/kbench_${sh// /_}.txt" 2>&1
done
echo "kbench ($((SECONDS-START)) s)" >>$S
grep -hE "qgemv(-bulk)? m=(1|8) |CHECK.*bulk.*FAIL" $L/kbench_*.txt | grep -v "u[124]w" | head -60 >>$S
B1=(--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2)
e2e q7b_int4_b1_bulk /tmp/q7b "FRUGAL_QGEMV_KERNEL=bulk" "${B1[@]}" --precision int4
e2e q7b_int4_b1_tile /tmp/q7b "FRUGAL_QGEMV_KERNEL=tile" "${B1[@]}" --precision int4
P2K=(--prefill-lens 2048 --reps 3 --warmup 1 --batches 0 --precision fp8-channel)
e2e q7b_p2k_default /tmp/q7b "FRUGAL_X=1" "${P2K[@]}"
(FRUGAL_QGEMV_KERNEL=bulk timeout 60 $T/cuda_quant_model_test >$L/qmodel.log 2>&1; echo "quant model (bulk GEMV, fast accumulation) rc $?" >>$S)
grep -hE "Failure" -A4 $L/qmodel.log | head -12 >>$S
e2e q7b_int8_b1_bulk /tmp/q7b "FRUGAL_QGEMV_KERNEL=bulk" "${B1[@]}" --precision int8
e2e q7b_fp8_b1_bulk /tmp/q7b "FRUGAL_QGEMV_KERNEL=bulk" "${B1[@]}" --precision fp8-channel
e2e q7b_fp8_b1_tile /tmp/q7b "FRUGAL_QGEMV_KERNEL=tile" "${B1[@]}" --precision fp8-channel
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --max-num-batched-tokens 8192 --throughput-reps 1)
e2e q7b_tp_fp8_default /tmp/q7b "FRUGAL_X=1" "${TP[@]}" --precision fp8-channel
e2e q7b_p2k_default2 /tmp/q7b "FRUGAL_X=1" "${P2K[@]}"
e2e q7b_p2k_nofast /tmp/q7b "FRUGAL_FP8_FAST_ACCUM=0" "${P2K[@]}"
finish 3
