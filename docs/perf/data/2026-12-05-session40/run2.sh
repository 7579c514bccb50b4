#!/usr/bin/env bash
# Session 40, device call 2 (warm, after run1): ctest -L cuda on the whole tree (not run since
# session 38: session 39's FA3 helper move and review commit, and this session's tracer), then the
# traces of the batched points: 7B int4 at 16 and 64 sequences (issue 18.3), the FP8 2048-token
# prefill (18.4, an eager step) and V2-Lite at 256 sequences.
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
[ -x build-gpu/src/cli/frugal ] || build
(cd build-gpu && timeout 300 ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -12 >>$S
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 1 --warmup 1"
trace q7b_int4_b16 /tmp/q7b "" $B --batches 16 --precision int4
trace q7b_int4_b64 /tmp/q7b "" $B --batches 64 --precision int4
trace q7b_fp8ch_p2048 /tmp/q7b "" --prefill-lens 2048 --reps 1 --warmup 1 --batches 0 --precision fp8-channel
trace v2l_b256 /tmp/v2l "" --prefill-lens 0 --batches 256 --decode-prompt-len 128 --decode-tokens 64 --reps 1 --warmup 1
finish 2
