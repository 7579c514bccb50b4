#!/usr/bin/env bash
# Device call 3 of session 35 (final tree): the whole build, ctest -L cuda, the MoE bench rows;
# end to end: 7B FP8 1000 x 128/128 with and without the cuBLASLt candidate timing (two reps:
# the first pays the timing), V2-Lite 1000 x 128/128 and its concurrency sweep.
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
S=$OUT/s3.txt
STOP=${STOP:-560}
left() { echo $((STOP - (SECONDS-START))); }
bash scripts/gpu/check.sh build >$L/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S; grep -E "error|FAILED" $L/build.log | head -5 >>$S
(cd build-gpu && timeout 230 ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -12 >>$S
timeout 40 build-gpu/tests/cuda/cuda_kernel_bench --moe >$L/kb_moe.txt 2>&1; echo "kb moe rc $? ($((SECONDS-START)) s)" >>$S
grep -E "^moe" $L/kb_moe.txt | grep -E "\[" | cut -c1-110 | head -14 >>$S
source scripts/gpu/lib.sh
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
catalog_config deepseek-v2-lite /tmp/v2l
e2e() { # name cfg env args...
  local name=$1 cfg=$2 envs=$3; shift 3
  local l=$(left); [ $l -gt 18 ] || { echo "$name: no time ($l s)" >>$S; return; }
  env $envs timeout $((l-2)) build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights $cfg/config.json "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|^prefill|^throughput|output tok" $L/$name.txt | tail -6 >>$S
  python3 -c "import json,sys; j=json.load(open('$L/$name.json')); t=j.get('throughput'); print('reps', t['output_tok_per_s_reps']) if t else None" >>$S 2>/dev/null
}
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --max-num-batched-tokens 8192)
e2e tp_fp8ch /tmp/q7b "FRUGAL_X=1" "${TP[@]}" --throughput-reps 2 --precision fp8-channel
e2e tp_fp8ch_notune /tmp/q7b "FRUGAL_LT_TUNE=0" "${TP[@]}" --throughput-reps 2 --precision fp8-channel
e2e v2l_tp /tmp/v2l "FRUGAL_X=1" "${TP[@]}" --throughput-reps 1
e2e v2l_sweep /tmp/v2l "FRUGAL_X=1" --prefill-lens 0 --reps 1 --warmup 1 --batches 1,8,32,64,128,256 --decode-prompt-len 512 \
  --decode-tokens 128 --max-num-seqs 256 --max-num-batched-tokens 8192
e2e tp_fp8 /tmp/q7b "FRUGAL_X=1" "${TP[@]}" --throughput-reps 2 --precision fp8
e2e p2k_fp8ch /tmp/q7b "FRUGAL_X=1" --prefill-lens 2048 --reps 3 --warmup 1 --batches 0 --precision fp8-channel
tar czf $OUT/logs3.tgz -C $L --exclude='*.o' . 2>/dev/null
cat $S
