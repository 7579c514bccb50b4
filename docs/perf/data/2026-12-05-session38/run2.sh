#!/usr/bin/env bash
# Session 38, device call 2 of 3.
#  - issue 18.3: the int4 rows of cuda_kernel_bench --quant (the slab GEMM beside the GEMV and the
#    one-quad GEMM at m = 1..64); int4 g128 decode at 16 and 64 sequences (512-token prompts) with
#    the slab GEMM from 9 tokens (FRUGAL_QGEMM_KERNEL=slab FRUGAL_QGEMM_MIN_M=9) against the
#    default (GEMV to 32 tokens, one-quad GEMM from 33) and bf16 at the same concurrency;
#  - issue 19.3: session 37's V2-Lite switches, A/B in one build (the base and the all-on runs
#    twice, alternated), then each alone, batch 2 and 1000 x 128/128 with all on.
#   FRUGAL_FUSE_ROUTE=1      the MoE block's input norm, router GEMV and routing in one cluster kernel (moe.cu)
#   FRUGAL_MOE_TINY_EARLY=1  the tiny MoE kernels ask L2 for their shared-expert rows before the PDL wait
#   FRUGAL_FUSE_NORM=1       the attention block's input norm inside the fused q / kv_a GEMV (gemv.cu)
source docs/perf/data/2026-12-05-session38/lib.sh
S=$OUT/s2.txt
build
T=build-gpu/tests/cuda
FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 60 $T/cuda_kernel_bench --quant >$L/kbench_gate.txt 2>&1
echo "kbench gate rc $? ($((SECONDS-START)) s)" >>$S
FRUGAL_QBENCH_ONLY="int4g128 down" timeout 60 $T/cuda_kernel_bench --quant >$L/kbench_down.txt 2>&1
echo "kbench down rc $? ($((SECONDS-START)) s)" >>$S
grep -hE "m=(1|4|8|16|32|64) " $L/kbench_gate.txt $L/kbench_down.txt | grep -vE " w[48]r[12]| u[0-9]w[48]" | head -60 >>$S
SLAB="FRUGAL_QGEMM_KERNEL=slab FRUGAL_QGEMM_MIN_M=9"
CONC=(--prefill-lens 0 --batches 16,64 --decode-prompt-len 512 --decode-tokens 128 --reps 2 --warmup 1 --max-num-seqs 64)
e2e q7b_int4_conc_slab /tmp/q7b "$SLAB" "${CONC[@]}" --precision int4
e2e q7b_int4_conc_base /tmp/q7b "FRUGAL_X=1" "${CONC[@]}" --precision int4
e2e q7b_bf16_conc /tmp/q7b "FRUGAL_X=1" "${CONC[@]}"
ALL="FRUGAL_FUSE_ROUTE=1 FRUGAL_MOE_TINY_EARLY=1 FRUGAL_FUSE_NORM=1"
B1=(--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2)
e2e v2l_b1_base /tmp/v2l "FRUGAL_X=1" "${B1[@]}"
e2e v2l_b1_all /tmp/v2l "$ALL" "${B1[@]}"
e2e v2l_b1_base2 /tmp/v2l "FRUGAL_X=1" "${B1[@]}"
e2e v2l_b1_all2 /tmp/v2l "$ALL" "${B1[@]}"
e2e v2l_b1_route /tmp/v2l "FRUGAL_FUSE_ROUTE=1" "${B1[@]}"
e2e v2l_b1_early /tmp/v2l "FRUGAL_MOE_TINY_EARLY=1" "${B1[@]}"
e2e v2l_b1_norm /tmp/v2l "FRUGAL_FUSE_NORM=1" "${B1[@]}"
e2e v2l_b2_all /tmp/v2l "$ALL" --prefill-lens 0 --batches 2 --decode-prompt-len 128 --decode-tokens 256 --reps 2
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --max-num-batched-tokens 8192 --throughput-reps 1)
e2e v2l_tp_all /tmp/v2l "$ALL" "${TP[@]}"
finish 2
