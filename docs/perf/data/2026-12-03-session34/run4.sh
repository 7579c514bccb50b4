#!/usr/bin/env bash
# Device call 4 of session 34 (final tree): the whole build, ctest -L cuda, the issue-20 rows.
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
S=$OUT/s4.txt
STOP=${STOP:-470}
left() { echo $((STOP - (SECONDS-START))); }
bash scripts/gpu/check.sh build >$L/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S; grep -E "error|FAILED" $L/build.log | head -5 >>$S
(cd build-gpu && timeout 270 ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -12 >>$S
source scripts/gpu/lib.sh
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
F=(build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 --dummy-weights /tmp/q7b/config.json)
e2e() { # name env args...
  local name=$1 envs=$2; shift 2
  local l=$(left); [ $l -gt 18 ] || { echo "$name: no time ($l s)" >>$S; return; }
  env $envs timeout $((l-2)) "${F[@]}" "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|^prefill" $L/$name.txt | tail -1 >>$S
}
D32=(--prefill-lens 0 --reps 2 --warmup 1 --batches 1 --decode-prompt-len 32768 --decode-tokens 128 --max-num-batched-tokens 8192)
B1=(--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2)
P32=(--prefill-lens 32768 --reps 2 --warmup 1 --batches 0 --max-num-batched-tokens 8192)
e2e pre32k "FRUGAL_X=1" "${P32[@]}"
e2e dec32k "FRUGAL_X=1" "${D32[@]}"
e2e b1 "FRUGAL_X=1" "${B1[@]}"
e2e dec32k_2 "FRUGAL_X=1" "${D32[@]}"
e2e pre32k_fp8 "FRUGAL_X=1" "${P32[@]}" --kv-cache-dtype fp8
e2e dec32k_3 "FRUGAL_X=1" "${D32[@]}"
e2e pre32k_nofa3 "FRUGAL_PREFILL_FA3=0" "${P32[@]}"
tar czf $OUT/logs4.tgz -C $L --exclude='*.o' . 2>/dev/null
cat $S
