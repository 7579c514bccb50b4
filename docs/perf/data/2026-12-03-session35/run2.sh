#!/usr/bin/env bash
# Device call 2 of session 35: the whole build and ctest -L cuda with the streaming MoE kernel,
# the persistent quantized GEMV and the vector FP8 activation quantization; their kernel benches;
# end to end: V2-Lite 1000 x 128/128 (stream vs WMMA), 7B fp8 / fp8-channel prefill and
# throughput, int4 / int8 / fp8 batch 1 (new GEMV vs old).
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
S=$OUT/s2.txt
STOP=${STOP:-570}
left() { echo $((STOP - (SECONDS-START))); }
bash scripts/gpu/check.sh build >$L/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S; grep -E "error|FAILED" $L/build.log | head -5 >>$S
(cd build-gpu && timeout 200 ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -12 >>$S
timeout 60 build-gpu/tests/cuda/cuda_kernel_bench --moe >$L/kb_moe.txt 2>&1; echo "kb moe rc $? ($((SECONDS-START)) s)" >>$S
grep -E "moe|CHECK" $L/kb_moe.txt | cut -c1-150 | head -24 >>$S
FRUGAL_QBENCH_ONLY="gate" timeout 60 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kb_quant_gate.txt 2>&1; echo "kb quant gate rc $? ($((SECONDS-START)) s)" >>$S
grep -E "qgemv m=1|FAIL|mismatch" $L/kb_quant_gate.txt | cut -c1-150 | head -20 >>$S
source scripts/gpu/lib.sh
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
catalog_config deepseek-v2-lite /tmp/v2l
e2e() { # name cfg env args...
  local name=$1 cfg=$2 envs=$3; shift 3
  local l=$(left); [ $l -gt 18 ] || { echo "$name: no time ($l s)" >>$S; return; }
  env $envs timeout $((l-2)) build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights $cfg/config.json "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|^prefill|^throughput|output tok" $L/$name.txt | tail -2 >>$S
}
P2K=(--prefill-lens 2048 --reps 3 --warmup 1 --batches 0)
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --throughput-reps 1 --max-num-seqs 256 --max-num-batched-tokens 8192)
B1=(--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2)
e2e v2l_tp /tmp/v2l "FRUGAL_X=1" "${TP[@]}"
e2e v2l_tp_wmma /tmp/v2l "FRUGAL_MOE_STREAM=0" "${TP[@]}"
e2e tp_fp8ch /tmp/q7b "FRUGAL_X=1" "${TP[@]}" --precision fp8-channel
e2e p2k_fp8ch /tmp/q7b "FRUGAL_X=1" "${P2K[@]}" --precision fp8-channel
e2e p2k_fp8 /tmp/q7b "FRUGAL_X=1" "${P2K[@]}" --precision fp8
e2e b1_int4 /tmp/q7b "FRUGAL_X=1" "${B1[@]}" --precision int4
e2e b1_int4_old /tmp/q7b "FRUGAL_QGEMV=old" "${B1[@]}" --precision int4
e2e b1_int8 /tmp/q7b "FRUGAL_X=1" "${B1[@]}" --precision int8
e2e b1_fp8ch /tmp/q7b "FRUGAL_X=1" "${B1[@]}" --precision fp8-channel
e2e tp_fp8 /tmp/q7b "FRUGAL_X=1" "${TP[@]}" --precision fp8
e2e v2l_tp_u4 /tmp/v2l "FRUGAL_MOE_STREAM_U=4" "${TP[@]}"
tar czf $OUT/logs2.tgz -C $L --exclude='*.o' . 2>/dev/null
cat $S
