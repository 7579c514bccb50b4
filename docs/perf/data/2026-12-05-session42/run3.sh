#!/usr/bin/env bash
# Session 42, device call 3 (an H100: no H200 came): V2-Lite batch 1 against the MLA decode's
# split count (FRUGAL_MLA_SPLITS; the default gives 4 at these contexts) and its merge inside the
# decode kernel (FRUGAL_MLA_FUSED_COMBINE=always), all A/Bs on one machine; FP8 1000 x 128/128 at
# 512 running sequences (between run 1's 256 and 1024).
# Run as: run(command: "bash docs/perf/data/2026-12-05-session42/run3.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s3.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal"; build; unset TARGETS
B1="--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
e2e v2l_b1 /tmp/v2l "" $B1
for s in 1 2 3 8; do e2e v2l_b1_splits$s /tmp/v2l "FRUGAL_MLA_SPLITS=$s" $B1; done
e2e v2l_b1_fusedmerge /tmp/v2l "FRUGAL_MLA_FUSED_COMBINE=always" $B1
e2e v2l_b1_again /tmp/v2l "" $B1
T="--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-batched-tokens 8192 --throughput-reps 1"
e2e fp8_tput_512 /tmp/q7b "" $T --max-num-seqs 512 --precision fp8-channel
finish 3
