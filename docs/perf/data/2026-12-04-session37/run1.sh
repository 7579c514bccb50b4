#!/usr/bin/env bash
# The first device call for session 37's changes, which were built and unit-tested on the CPU
# machine only (no device was lent in session 37). Build; the CUDA tests that cover them
# (CudaFused.{MoeRouter,RmsNormMatmul}*, CudaMoe.* with the tiny path's early loads), then
# ctest -L cuda; V2-Lite batch 1 with each switch alone and all together (A/B in one build, the
# base and the all-on runs twice, alternated), batch 2 and 1000 x 128/128 with all on; 7B bf16
# batch 1 with and without the fused norm; 7B FP8 per-channel 2048 prefill and 1000 x 128/128
# with and without it (the norm inside the W8A8 activation quantization). The run is longer than
# one call's 570 s budget: what does not fit says "no time"; split it over two calls (STOP=570 each,
# the first with the V2-Lite lines, the second with the 7B ones) if so.
#   FRUGAL_FUSE_ROUTE=1      the MoE block's input norm, router GEMV and routing in one cluster kernel (moe.cu)
#   FRUGAL_MOE_TINY_EARLY=1  the tiny MoE kernels ask L2 for their shared-expert rows before the PDL wait
#   FRUGAL_FUSE_NORM=1       the attention block's input norm inside the fused qkv (q / kv_a) GEMV (gemv.cu),
#                            and inside the FP8 W8A8 activation quantization (fp8_act.cu)
# Run as: run(command: "bash docs/perf/data/2026-12-04-session37/run1.sh", carry: [".devcarry"]),
# with the tree staged under 64 MiB (the reference model and tests/data/shared left behind).
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
S=$OUT/s1.txt
STOP=${STOP:-570}
left() { echo $((STOP - (SECONDS-START))); }
bash scripts/gpu/check.sh build >$L/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S; grep -E "error|FAILED" $L/build.log | head -5 >>$S
T=build-gpu/tests/cuda
(timeout 90 $T/cuda_fused_test --gtest_filter='CudaFused.MoeRouter*:CudaFused.RmsNormMatmul*' >$L/fused.log 2>&1; echo "fused rc $?" >>$S)
(timeout 120 $T/cuda_moe_shared_test >$L/moe_shared.log 2>&1; echo "moe_shared rc $?" >>$S)
(timeout 120 $T/cuda_w8a8_test --gtest_filter='CudaW8a8.RmsNormMatmul*' >$L/w8a8.log 2>&1; echo "w8a8 rc $?" >>$S)
grep -E "FAILED|Failure" $L/fused.log $L/moe_shared.log $L/w8a8.log | head -10 >>$S
(cd build-gpu && timeout 200 ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -12 >>$S
source scripts/gpu/lib.sh
catalog_config deepseek-v2-lite /tmp/v2l
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
e2e() { # name cfg env args...
  local name=$1 cfg=$2 envs=$3; shift 3
  local l=$(left); [ $l -gt 18 ] || { echo "$name: no time ($l s)" >>$S; return; }
  env $envs timeout $((l-2)) build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights $cfg/config.json "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|^prefill|^throughput|output tok|engine:" $L/$name.txt | tail -4 >>$S
}
ALL="FRUGAL_FUSE_ROUTE=1 FRUGAL_MOE_TINY_EARLY=1 FRUGAL_FUSE_NORM=1"
B1=(--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2)
e2e v2l_b1_base /tmp/v2l "FRUGAL_X=1" "${B1[@]}"
e2e v2l_b1_all /tmp/v2l "$ALL" "${B1[@]}"
e2e v2l_b1_route /tmp/v2l "FRUGAL_FUSE_ROUTE=1" "${B1[@]}"
e2e v2l_b1_early /tmp/v2l "FRUGAL_MOE_TINY_EARLY=1" "${B1[@]}"
e2e v2l_b1_norm /tmp/v2l "FRUGAL_FUSE_NORM=1" "${B1[@]}"
e2e v2l_b1_base2 /tmp/v2l "FRUGAL_X=1" "${B1[@]}"
e2e v2l_b1_all2 /tmp/v2l "$ALL" "${B1[@]}"
e2e q7b_b1_base /tmp/q7b "FRUGAL_X=1" "${B1[@]}"
e2e q7b_b1_norm /tmp/q7b "FRUGAL_FUSE_NORM=1" "${B1[@]}"
e2e v2l_b2_all /tmp/v2l "$ALL" --prefill-lens 0 --batches 2 --decode-prompt-len 128 --decode-tokens 256 --reps 2
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --max-num-batched-tokens 8192 --throughput-reps 1)
e2e v2l_tp_all /tmp/v2l "$ALL" "${TP[@]}"
P2K=(--prefill-lens 2048 --reps 3 --warmup 1 --batches 0 --precision fp8-channel)
e2e q7b_p2k_base /tmp/q7b "FRUGAL_X=1" "${P2K[@]}"
e2e q7b_p2k_norm /tmp/q7b "FRUGAL_FUSE_NORM=1" "${P2K[@]}"
e2e q7b_tp_fp8_norm /tmp/q7b "FRUGAL_FUSE_NORM=1" "${TP[@]}" --precision fp8-channel
e2e q7b_tp_fp8_base /tmp/q7b "FRUGAL_X=1" "${TP[@]}" --precision fp8-channel
tar czf $OUT/logs1.tgz -C $L --exclude='*.o' . 2>/dev/null
cat $S
