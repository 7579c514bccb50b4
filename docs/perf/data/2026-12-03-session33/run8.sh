#!/usr/bin/env bash
# Device call 2 of session 33: main with the pipelined prefill loop, the split-k / early-load GEMV
# and the tensor-core MLA kernel: build; ctest -L cuda; kernel rows; e2e A/B.
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
S=$OUT/s8.txt
STOP=${STOP:-560}
left() { echo $((STOP - (SECONDS-START))); }
bash scripts/gpu/check.sh build >$L/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S
(cd build-gpu && timeout 210 ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" $L/ctest.log | head -20 >>$S
grep -E "^\[  FAILED|Failure|error:|Expected|Which is|actual" $L/ctest.log | head -30 >>$S
B=build-gpu/tests/cuda/cuda_kernel_bench
FRUGAL_ABENCH_ONLY="len=8192 ctx=32768" timeout 60 $B --attn >$L/attn_pre.txt 2>&1; grep -E "attn prefill" $L/attn_pre.txt | tail -3 >>$S
FRUGAL_ABENCH_ONLY="attn mla" timeout 40 $B --attn >$L/attn_mla.txt 2>&1; grep -E "attn mla" $L/attn_mla.txt | tail -6 >>$S
timeout 40 $B --gemv >$L/gemv.txt 2>&1; grep -E "gemv-ab" $L/gemv.txt | tail -14 >>$S
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
P32=(--prefill-lens 32768 --reps 2 --warmup 1 --batches 0 --max-num-batched-tokens 8192)
e2e pre32k_pipe "FRUGAL_X=1" $Q "${P32[@]}"
e2e pre32k_nopipe "FRUGAL_PREFILL_PIPE=0" $Q "${P32[@]}"
B1=(--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2)
e2e b1_bf16 "FRUGAL_X=1" $Q "${B1[@]}"
e2e b1_bf16_oldgemv "FRUGAL_GEMV_SPLITK=0 FRUGAL_GEMV_EARLY=0" $Q "${B1[@]}"
e2e dec32k_bf16 "FRUGAL_X=1" $Q --prefill-lens 0 --reps 2 --warmup 1 --batches 1 --decode-prompt-len 32768 --decode-tokens 128 --max-num-batched-tokens 8192
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --throughput-reps 1 --max-num-seqs 256 --max-num-batched-tokens 8192)
e2e v2_tput "FRUGAL_X=1" $V "${TP[@]}"
e2e v2_tput_oldmla "FRUGAL_MLA_MMA=0" $V "${TP[@]}"
e2e pre32k_fp8 "FRUGAL_X=1" $Q "${P32[@]}" --kv-cache-dtype fp8
tar czf $OUT/logs8.tgz -C $L --exclude='*.o' . 2>/dev/null
cat $S
