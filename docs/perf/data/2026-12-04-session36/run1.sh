#!/usr/bin/env bash
# Device call 1 of session 36: build; the CUDA tests the session's first changes touch (the op
# harness, W8A8, goldens); V2-Lite batch 1 with q/kv_a fused and not; 7B FP8 per-channel with
# silu_mul fused into the down projection's activation quantization and not (2048 prefill,
# 1000 x 128/128).
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
S=$OUT/s1.txt
STOP=${STOP:-570}
left() { echo $((STOP - (SECONDS-START))); }
bash scripts/gpu/check.sh build >$L/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S; grep -E "error|FAILED" $L/build.log | head -5 >>$S
(cd build-gpu && timeout 150 ctest -R "cuda_harness_test|cuda_golden_test|cuda_ops_test" -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -12 >>$S
source scripts/gpu/lib.sh
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
catalog_config deepseek-v2-lite /tmp/v2l
e2e() { # name cfg env args...
  local name=$1 cfg=$2 envs=$3; shift 3
  local l=$(left); [ $l -gt 18 ] || { echo "$name: no time ($l s)" >>$S; return; }
  env $envs timeout $((l-2)) build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights $cfg/config.json "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|^prefill|^throughput|output tok" $L/$name.txt | tail -4 >>$S
}
B1=(--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2)
e2e v2l_b1_qkva1 /tmp/v2l "FRUGAL_X=1" "${B1[@]}"
e2e v2l_b1_qkva0 /tmp/v2l "FRUGAL_MLA_FUSE_QKVA=0" "${B1[@]}"
P2K=(--prefill-lens 2048 --reps 3 --warmup 1 --batches 0 --precision fp8-channel)
e2e p2k_sq1 /tmp/q7b "FRUGAL_X=1" "${P2K[@]}"
e2e p2k_sq0 /tmp/q7b "FRUGAL_FUSE_SILU_QUANT=0" "${P2K[@]}"
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --max-num-batched-tokens 8192 --throughput-reps 1 --precision fp8-channel)
e2e tp_sq1 /tmp/q7b "FRUGAL_X=1" "${TP[@]}"
e2e tp_sq0 /tmp/q7b "FRUGAL_FUSE_SILU_QUANT=0" "${TP[@]}"
e2e v2l_b1_qkva1b /tmp/v2l "FRUGAL_X=1" "${B1[@]}"
tar czf $OUT/logs1.tgz -C $L --exclude='*.o' . 2>/dev/null
cat $S
