#!/usr/bin/env bash
# DeepSeek-V2-Lite (issue 19, acceptance 3) on the GPU machine, dummy bf16 weights: batch-1
# decode, 1000 x 128/128 throughput and a concurrency sweep 1..256, JSON / markdown / logs under
# $OUT. Needs a built build-gpu (scripts/gpu/check.sh build). Steps (any subset, in order):
#   decode1  batch-1 decode (128 in / 256 out)
#   tput     1000 prompts x 128/128
#   sweep    decode at 1, 8, 32, 64, 128, 256 (512 in / 128 out)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # the repository root as working directory; ROOT, OUT, BUILD_DIR
mkdir -p "$OUT" /tmp/v2lite
catalog_config deepseek-v2-lite /tmp/v2lite
F=("$BUILD_DIR/src/cli/frugal" bench offline --dummy-weights /tmp/v2lite/config.json --device cuda --gpu h200
   --ceiling-gbps 4259 --ceiling-tflops 790)
TABLE="$OUT/deepseek_summary.txt"
: >"$TABLE"
run() {  # name, args...
  local name=$1; shift
  local t0=$SECONDS
  "${F[@]}" "$@" --json "$OUT/ds_$name.json" --markdown "$OUT/ds_$name.md" >"$OUT/ds_$name.txt" 2>&1
  echo "== $name: rc $? ($((SECONDS - t0)) s)" >>"$TABLE"
  grep -vE "^ceilings|^bench  " "$OUT/ds_$name.txt" | tail -12 >>"$TABLE"
}
for step in "$@"; do
  case "$step" in
    decode1) run decode1 --prefill-lens 512 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 3 --warmup 1 ;;
    tput) run tput --prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 \
            --throughput-reps 1 --max-num-seqs 256 --max-num-batched-tokens 8192 ;;
    sweep) run sweep --prefill-lens 0 --reps 1 --warmup 1 --batches 1,8,32,64,128,256 --decode-prompt-len 512 \
             --decode-tokens 128 --max-num-seqs 256 --max-num-batched-tokens 8192 ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
echo "===== deepseek summary ====="
cat "$TABLE"
