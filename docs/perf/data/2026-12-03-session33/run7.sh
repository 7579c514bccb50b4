#!/usr/bin/env bash
# Device call 1 of session 33: profiles only. Build frugal + cuda_kernel_bench; ncu of the wgmma
# prefill kernel (v2) on the last 8k chunk of a 32k prompt; per-kernel time of a 7B b=1 decode step
# at a 32k context and at 128; V2-Lite b=256 decode step.
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
S=$OUT/s7.txt
TARGETS="frugal cuda_kernel_bench" bash scripts/gpu/check.sh build >/tmp/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S
timeout 120 bash scripts/gpu/accept.sh prefill_ncu >/tmp/ncu.log 2>&1
echo "prefill_ncu rc $? ($((SECONDS-START)) s)" >>$S; cat $OUT/accept_summary.txt >>$S
DECODE_PROMPT=32768 timeout 150 bash scripts/gpu/kernel_profile.sh deepseek-r1-distill-qwen-7b 4 1 6 >>$S 2>&1
echo "prof 7b ctx32k rc $? ($((SECONDS-START)) s)" >>$S
timeout 90 bash scripts/gpu/kernel_profile.sh deepseek-r1-distill-qwen-7b 4 1 6 >>$S 2>&1
echo "prof 7b ctx128 rc $? ($((SECONDS-START)) s)" >>$S
timeout 120 bash scripts/gpu/kernel_profile.sh deepseek-v2-lite 4 256 6 >>$S 2>&1
echo "prof v2lite b256 rc $? ($((SECONDS-START)) s)" >>$S
rm -f $OUT/*.csv
cat $S
