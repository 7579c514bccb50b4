#!/usr/bin/env bash
# Device call 3 of session 33: the final tree (gather-only prefill change, split-k GEMV, MLA mma,
# MoE mma, sliced combine): build; ctest -L cuda; kernel rows; e2e A/B.
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
S=$OUT/s9.txt
STOP=${STOP:-565}
left() { echo $((STOP - (SECONDS-START))); }
bash scripts/gpu/check.sh build >$L/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S; grep -E "error|FAILED" $L/build.log | head -5 >>$S
(cd build-gpu && timeout 200 ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" $L/ctest.log | head -20 >>$S
grep -E "^\[  FAILED|Failure|Expected|Which is|actual" $L/ctest.log | head -30 >>$S
B=build-gpu/tests/cuda/cuda_kernel_bench
FRUGAL_ABENCH_ONLY="len=8192 ctx=32768" timeout 50 $B --attn >$L/attn_pre.txt 2>&1; grep -E "attn prefill" $L/attn_pre.txt | tail -2 >>$S
timeout 60 $B --moe >$L/moe.txt 2>&1; grep -E "moe" $L/moe.txt | tail -10 >>$S
FRUGAL_DABENCH_ONLY=1x32768 timeout 60 $B --decode-attn >$L/dattn.txt 2>&1; grep -E "bf16 1x32768 (tensor-core|tc 3)" $L/dattn.txt | grep -v max_ctx | head -14 >>$S
echo "benches done ($((SECONDS-START)) s)" >>$S
source scripts/gpu/lib.sh
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
catalog_config deepseek-v2-lite /tmp/v2lite
F=(build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790)
e2e() { # name env model args...
  local name=$1 envs=$2 model=$3; shift 3
  local l=$(left); [ $l -gt 25 ] || { echo "$name: no time ($l s)" >>$S; return; }
  env $envs timeout $((l-3)) "${F[@]}" --dummy-weights $model "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -vE "^ceilings|^bench  |^memory|^model" $L/$name.txt | tail -3 >>$S
}
Q=/tmp/q7b/config.json; V=/tmp/v2lite/config.json
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --throughput-reps 1 --max-num-seqs 256 --max-num-batched-tokens 8192)
e2e v2_tput "FRUGAL_X=1" $V "${TP[@]}"
e2e v2_tput_oldmoe "FRUGAL_MOE_MMA=0" $V "${TP[@]}"
D32=(--prefill-lens 0 --reps 2 --warmup 1 --batches 1 --decode-prompt-len 32768 --decode-tokens 128 --max-num-batched-tokens 8192)
e2e dec32k_sliced "FRUGAL_DECODE_COMBINE=sliced" $Q "${D32[@]}"
e2e dec32k_sliced_l2 "FRUGAL_DECODE_COMBINE=sliced FRUGAL_DECODE_L2_PREFETCH=1" $Q "${D32[@]}"
e2e dec32k "FRUGAL_X=1" $Q "${D32[@]}"
P32=(--prefill-lens 32768 --reps 2 --warmup 1 --batches 0 --max-num-batched-tokens 8192)
e2e pre32k "FRUGAL_X=1" $Q "${P32[@]}"
e2e pre32k_fp8 "FRUGAL_X=1" $Q "${P32[@]}" --kv-cache-dtype fp8
e2e v2_b1 "FRUGAL_X=1" $V --prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2
e2e v2_tput_moeall "FRUGAL_MOE_MMA=all" $V "${TP[@]}"
tar czf $OUT/logs9.tgz -C $L --exclude='*.o' . 2>/dev/null
cat $S
