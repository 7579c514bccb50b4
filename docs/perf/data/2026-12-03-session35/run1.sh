#!/usr/bin/env bash
# Device call 1 of session 35: build; FP8 W8A8 with 128x128 block scales against per-channel
# scales (2048 prefill, 1000 x 128/128); kernel profiles of the fp8 prefill and decode steps and of
# V2-Lite batch-1 decode.
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
S=$OUT/s1.txt
STOP=${STOP:-540}
left() { echo $((STOP - (SECONDS-START))); }
bash scripts/gpu/check.sh build >$L/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S; grep -E "error|FAILED" $L/build.log | head -5 >>$S
source scripts/gpu/lib.sh
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
F=(build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 --dummy-weights /tmp/q7b/config.json)
e2e() { # name env args...
  local name=$1 envs=$2; shift 2
  local l=$(left); [ $l -gt 18 ] || { echo "$name: no time ($l s)" >>$S; return; }
  env $envs timeout $((l-2)) "${F[@]}" "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|^prefill|^throughput|output tok" $L/$name.txt | tail -2 >>$S
}
P2K=(--prefill-lens 2048 --reps 3 --warmup 1 --batches 0)
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --throughput-reps 1 --max-num-seqs 256 --max-num-batched-tokens 8192)
e2e p2k_fp8 "FRUGAL_X=1" "${P2K[@]}" --precision fp8
e2e p2k_fp8ch "FRUGAL_X=1" "${P2K[@]}" --precision fp8-channel
e2e tp_fp8ch "FRUGAL_X=1" "${TP[@]}" --precision fp8-channel
e2e tp_fp8 "FRUGAL_X=1" "${TP[@]}" --precision fp8
e2e tp_bf16 "FRUGAL_X=1" "${TP[@]}"
prof() { # args of kernel_profile.sh, env
  local l=$(left); [ $l -gt 40 ] || { echo "prof $*: no time ($l s)" >>$S; return; }
  timeout $((l-5)) bash scripts/gpu/kernel_profile.sh "$@" >$L/prof_$(echo "$*" | tr ' ' _).log 2>&1
  echo "== prof $* $PRECISION rc $? ($((SECONDS-START)) s)" >>$S
}
PRECISION=fp8 prof deepseek-r1-distill-qwen-7b 2 p2048
PRECISION=fp8-channel prof deepseek-r1-distill-qwen-7b 2 p2048
PRECISION=fp8-channel prof deepseek-r1-distill-qwen-7b 2 256 4
PRECISION=bf16 prof deepseek-v2-lite 4 1 8
e2e b1_fp8ch "FRUGAL_X=1" --prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --precision fp8-channel
cp $OUT/*.txt $L/ 2>/dev/null
tar czf $OUT/logs1.tgz -C $L --exclude='*.o' . 2>/dev/null
cat $S
for f in $OUT/prof_*.txt; do echo "#### $f"; head -22 $f | cut -c1-200; done
