#!/usr/bin/env bash
# Everything the lead runs on the GPU machine in one call: full-tree build (sm_90a), every
# cuda-labelled test (op harness, kernels, golden models on CUDA), the engine benchmarks on the
# DeepSeek-R1-Distill-Qwen-7B shape with dummy weights, and time to first token of `frugal run`
# on a 7B checkpoint written by transformers. Logs under $OUT; a short table last.
#   bash scripts/gpu/full.sh [build] [test] [bench] [ttft]
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # the repository root as working directory; ROOT, OUT, BUILD_DIR
FRUGAL="$BUILD_DIR/src/cli/frugal"
[ $# -gt 0 ] || set -- build test bench ttft
TABLE="$OUT/full_summary.txt"
: >"$TABLE"
for step in "$@"; do
  case "$step" in
    build|test) bash scripts/gpu/check.sh "$step" >"$OUT/check_$step.txt" 2>&1; echo "$step: rc $?" >>"$TABLE"
                tail -15 "$OUT/check_$step.txt" >>"$TABLE" ;;
    bench)
      catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
      "$FRUGAL" bench offline --dummy-weights /tmp/q7b/config.json --device cuda --gpu h200 \
        --prefill-lens 2048 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 5 --warmup 1 \
        --ceiling-gbps 4259 --ceiling-tflops 790 --json "$OUT/bench_7b_b1.json" --markdown "$OUT/bench_7b_b1.md" \
        >"$OUT/bench_b1.txt" 2>&1
      echo "bench b1: rc $?" >>"$TABLE"; cat "$OUT/bench_b1.txt" | tail -12 >>"$TABLE"
      "$FRUGAL" bench offline --dummy-weights /tmp/q7b/config.json --device cuda --gpu h200 \
        --prefill-lens 512 --batches 8,32,64,256 --decode-prompt-len 512 --decode-tokens 128 --reps 2 --warmup 1 \
        --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --max-num-batched-tokens 8192 \
        --ceiling-gbps 4259 --ceiling-tflops 790 --json "$OUT/bench_7b_sweep.json" >"$OUT/bench_sweep.txt" 2>&1
      echo "bench sweep: rc $?" >>"$TABLE"; tail -12 "$OUT/bench_sweep.txt" >>"$TABLE"
      "$FRUGAL" bench offline --dummy-weights /tmp/q7b/config.json --device cuda --gpu h200 \
        --prefill-lens 2048 --batches 1 --decode-tokens 16 --reps 1 --warmup 0 \
        --num-prompts 1000 --input-len 1024 --output-len 128 --max-num-seqs 256 --max-num-batched-tokens 8192 \
        --ceiling-gbps 4259 --ceiling-tflops 790 --json "$OUT/bench_7b_1024.json" >"$OUT/bench_1024.txt" 2>&1
      echo "bench 1024/128: rc $?" >>"$TABLE"; grep -E "throughput|per step" "$OUT/bench_1024.txt" >>"$TABLE"
      grep -h "per step" "$OUT/bench_b1.txt" "$OUT/bench_sweep.txt" >>"$TABLE" ;;
    ttft)
      python3 scripts/gpu/make_7b_checkpoint.py data/catalog/models/deepseek-r1-distill-qwen-7b.json /tmp/q7b_ckpt \
        >"$OUT/ttft.txt" 2>&1
      for i in 1 2; do  # the second run is from a warm page cache
        python3 scripts/gpu/ttft.py "$FRUGAL" run --model /tmp/q7b_ckpt --device cuda \
          --prompt-ids "151646 785 3974 13876 38835" --max-tokens 8 --temperature 0 >>"$OUT/ttft.txt" 2>&1
      done
      echo "ttft:" >>"$TABLE"; grep "first output byte" "$OUT/ttft.txt" >>"$TABLE" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
echo "===== full summary ====="
cat "$TABLE"
