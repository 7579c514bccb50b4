#!/usr/bin/env bash
# Session 43, device call 2, on run 1's machine while it is warm (after run 1's winners became
# defaults): the whole tree built; `ctest -L cuda` (issue 18.1; last full run session 41);
# then, while time is left, 18.2's batch-1 points and 18.3's ratios with this session's
# defaults, and 18.4's 1,024 sequences with FP8 KV and in bf16.
# Run as: run(command: "bash docs/perf/data/2026-12-05-session43/run2.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
build
(cd build-gpu && timeout 260 ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -12 >>$S
B1="--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
e2e q7b_int4_b1 /tmp/q7b "" $B1 --precision int4
e2e q7b_bf16_b1 /tmp/q7b "" $B1
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e q7b_int4_b16 /tmp/q7b "" $B --batches 16 --precision int4
e2e q7b_bf16_b16 /tmp/q7b "" $B --batches 16
e2e q7b_int4_b64 /tmp/q7b "" $B --batches 64 --precision int4
e2e q7b_bf16_b64 /tmp/q7b "" $B --batches 64
T="--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-batched-tokens 8192 --throughput-reps 1"
e2e fp8_tput_1024_kv8 /tmp/q7b "" $T --max-num-seqs 1024 --precision fp8-channel --kv-cache-dtype fp8
e2e bf16_tput_1024 /tmp/q7b "" $T --max-num-seqs 1024
finish 2
