#!/usr/bin/env bash
# Session 38, device call 2 of 3: session 37's V2-Lite switches (issue 19.3), A/B in one build,
# the base and all-on runs twice, alternated; batch 2 and 1000 x 128/128 with all on.
#   FRUGAL_FUSE_ROUTE=1      the MoE block's input norm, router GEMV and routing in one cluster kernel (moe.cu)
#   FRUGAL_MOE_TINY_EARLY=1  the tiny MoE kernels ask L2 for their shared-expert rows before the PDL wait
#   FRUGAL_FUSE_NORM=1       the attention block's input norm inside the fused q / kv_a GEMV (gemv.cu)
source docs/perf/data/2026-12-05-session38/lib.sh
S=$OUT/s2.txt
build
ALL="FRUGAL_FUSE_ROUTE=1 FRUGAL_MOE_TINY_EARLY=1 FRUGAL_FUSE_NORM=1"
B1=(--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2)
e2e v2l_b1_base /tmp/v2l "FRUGAL_X=1" "${B1[@]}"
e2e v2l_b1_all /tmp/v2l "$ALL" "${B1[@]}"
e2e v2l_b1_route /tmp/v2l "FRUGAL_FUSE_ROUTE=1" "${B1[@]}"
e2e v2l_b1_early /tmp/v2l "FRUGAL_MOE_TINY_EARLY=1" "${B1[@]}"
e2e v2l_b1_norm /tmp/v2l "FRUGAL_FUSE_NORM=1" "${B1[@]}"
e2e v2l_b1_base2 /tmp/v2l "FRUGAL_X=1" "${B1[@]}"
e2e v2l_b1_all2 /tmp/v2l "$ALL" "${B1[@]}"
e2e v2l_b2_all /tmp/v2l "$ALL" --prefill-lens 0 --batches 2 --decode-prompt-len 128 --decode-tokens 256 --reps 2
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --max-num-batched-tokens 8192 --throughput-reps 1)
e2e v2l_tp_all /tmp/v2l "$ALL" "${TP[@]}"
finish 2
