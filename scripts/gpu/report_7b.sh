#!/usr/bin/env bash
# Issue 21, acceptance 3, on the H200: two `frugal report` runs, packed for docs/perf/.
#   1. speed rows: the DeepSeek-R1-Distill-Qwen-7B configuration with dummy weights of each
#      precision (`--dummy-weights`; marked "dummy weights (P; speed only)" in the report; the
#      three int4 rows share one measurement: the same format and kernels);
#   2. quality rows: the reference model (models/reference-qwen2-20m) quantized by frugal quantize
#      to each precision, benchmarked and scored (PPL and KLD vs bf16 on held-out War and Peace,
#      MMLU 5-shot) on the same GPU.
# Both write report.{md,json,html}; they come back as ONE file, $OUT/report-7b.tar.gz (the device
# tool returns at most 8 files), plus $OUT/report-7b.log and lines in $OUT/summary.txt.
#
# Tree: the reference model and tests/data/report must travel:
#   bash /work/devprep.sh TREE NAME tests/data/report models/reference-qwen2-20m
# Device call (carry [".devcarry/NAME"]), build and reports in one command (~9 min budget):
#   cd .devcarry/NAME && TARGETS=frugal bash scripts/gpu/check.sh build && bash scripts/gpu/report_7b.sh
# Environment (defaults for the H200):
#   DEVICE=cuda GPU=h200 CONFIG_NAME=deepseek-r1-distill-qwen-7b (catalog) or CONFIG=path/config.json
#   SPEED_ARGS / QUALITY_ARGS: `frugal report` bench sizes for each run. The quantized formats run
#   on CUDA's correctness kernels (one warp per output element, weights re-read per token: issue
#   18 brings the fast ones), so the 7B sweep stops at 64 and the prefill point is 512 tokens;
#   estimated from the kernel's traffic (not measured), a quantized 7B row takes about a minute.
#   SPEED_TIMEOUT=270 QUALITY_TIMEOUT=150 (seconds; a run past it is stopped with SIGINT, so the
#   rows it finished are still written, the rest marked "not run")
#   MMLU_DIR: MMLU in the Hendrycks layout (default: data/corpus/mmlu.tar.xz unpacked; its test
#   questions are of the 28 subjects the reference model trained on, so its accuracy measures
#   what quantization takes from what the model learned, not general ability)
# A CPU check of the script itself (small, minutes on two cores):
#   DEVICE=cpu GPU=rtx-4090 CONFIG=models/reference-qwen2-20m/config.json \
#     SPEED_ARGS=--quick QUALITY_ARGS="--quick --calib-tokens 256" BUILD_DIR=build bash scripts/gpu/report_7b.sh
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # the repository root as working directory; ROOT, OUT, BUILD_DIR
DEVICE="${DEVICE:-cuda}"
GPU="${GPU:-h200}"
CONFIG_NAME="${CONFIG_NAME:-deepseek-r1-distill-qwen-7b}"
SPEED_TIMEOUT="${SPEED_TIMEOUT:-270}"
QUALITY_TIMEOUT="${QUALITY_TIMEOUT:-150}"
SPEED_ARGS="${SPEED_ARGS---concurrency 1,16,64 --prefill-len 512 --decode-tokens 64 --bench-reps 3}"
QUALITY_ARGS="${QUALITY_ARGS---concurrency 1,16,64 --bench-reps 3}"
WORK=$(mktemp -d /tmp/report7b.XXXXXX)
LOG="$OUT/report-7b.log"
: >"$LOG"
note() { echo "$*" | tee -a "$OUT/summary.txt" "$LOG"; }
F="$BUILD_DIR/src/cli/frugal"
[ -x "$F" ] || { note "report-7b: $F not built (TARGETS=frugal bash scripts/gpu/check.sh build)"; exit 1; }
for need in models/reference-qwen2-20m/config.json tests/data/report/war-and-peace-excerpt.txt; do
  [ -f "$need" ] || { note "report-7b: $need missing (devprep: name tests/data/report models/reference-qwen2-20m)"; exit 1; }
done
if [ -n "${CONFIG:-}" ]; then
  cp "$CONFIG" "$WORK/config.json"
else
  catalog_config "$CONFIG_NAME" "$WORK"
fi
if [ -z "${MMLU_DIR:-}" ]; then
  MMLU_DIR="$WORK/mmlu"
  mkdir -p "$MMLU_DIR" && tar -xJf data/corpus/mmlu.tar.xz -C "$MMLU_DIR"
fi
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv >>"$LOG" 2>&1 || true

# run NAME TIMEOUT ARGS...: frugal report into $WORK/NAME; SIGINT at the timeout (the report
# finishes the row in progress, marks the rest "not run" and exits 3), KILL 60 s later.
run() {
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  timeout -s INT -k 60 "$limit" "$F" report "$@" --out "$WORK/$name" >"$WORK/$name.txt" 2>&1
  local rc=$?
  cat "$WORK/$name.txt" >>"$LOG"
  note "report-7b: $name rc $rc ($((SECONDS - t0)) s)"
  grep -E "^  (bf16|fp8|int8|int4|nf4)|^  ->" "$WORK/$name.txt" | tee -a "$OUT/summary.txt"
  mkdir -p "$WORK/pack/$name"
  cp "$WORK/$name"/report.{md,json,html} "$WORK/pack/$name/" 2>/dev/null
}

# shellcheck disable=SC2086
run q7b-speed "$SPEED_TIMEOUT" --dummy-weights "$WORK/config.json" --device "$DEVICE" --gpu "$GPU" $SPEED_ARGS
# shellcheck disable=SC2086
run reference-quality "$QUALITY_TIMEOUT" --model models/reference-qwen2-20m --device "$DEVICE" --gpu "$GPU" \
  --text tests/data/report/war-and-peace-excerpt.txt --mc "$MMLU_DIR" --quant-cache "$WORK/checkpoints" $QUALITY_ARGS
tar -czf "$OUT/report-7b.tar.gz" -C "$WORK/pack" .
note "report-7b: $OUT/report-7b.tar.gz ($(tar -tzf "$OUT/report-7b.tar.gz" | grep -c 'report\.') files); unpack into docs/perf/data/<date>-report-7b/"
rm -rf "$WORK"
