#!/usr/bin/env bash
# Session 38, device call 3 of 3: the other 7B lines.
#  - issue 18.2: bf16 batch 1 with and without session 37's fused norm (FRUGAL_FUSE_NORM=1);
#    int4 / int8 / fp8 batch 1 through the slab GEMM from one token against the GEMV;
#  - issue 18.4: FP8 per-channel 2048 prefill and 1000 x 128/128 with and without the fused norm
#    (the norm inside the W8A8 activation quantization).
source docs/perf/data/2026-12-05-session38/lib.sh
S=$OUT/s3.txt
build
B1=(--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2)
e2e q7b_b1_base /tmp/q7b "FRUGAL_X=1" "${B1[@]}"
e2e q7b_b1_norm /tmp/q7b "FRUGAL_FUSE_NORM=1" "${B1[@]}"
SLAB1="FRUGAL_QGEMM_KERNEL=slab FRUGAL_QGEMM_MIN_M=1"
e2e q7b_int4_b1_base /tmp/q7b "FRUGAL_X=1" "${B1[@]}" --precision int4
e2e q7b_int4_b1_slab /tmp/q7b "$SLAB1" "${B1[@]}" --precision int4
e2e q7b_int8_b1_base /tmp/q7b "FRUGAL_X=1" "${B1[@]}" --precision int8
e2e q7b_int8_b1_slab /tmp/q7b "$SLAB1" "${B1[@]}" --precision int8
e2e q7b_fp8_b1_base /tmp/q7b "FRUGAL_X=1" "${B1[@]}" --precision fp8-channel
e2e q7b_fp8_b1_slab /tmp/q7b "$SLAB1" "${B1[@]}" --precision fp8-channel
P2K=(--prefill-lens 2048 --reps 3 --warmup 1 --batches 0 --precision fp8-channel)
e2e q7b_p2k_base /tmp/q7b "FRUGAL_X=1" "${P2K[@]}"
e2e q7b_p2k_norm /tmp/q7b "FRUGAL_FUSE_NORM=1" "${P2K[@]}"
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --max-num-batched-tokens 8192 --throughput-reps 1)
e2e q7b_tp_fp8_norm /tmp/q7b "FRUGAL_FUSE_NORM=1" "${TP[@]}" --precision fp8-channel
e2e q7b_tp_fp8_base /tmp/q7b "FRUGAL_X=1" "${TP[@]}" --precision fp8-channel
finish 3
