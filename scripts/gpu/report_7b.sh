#!/usr/bin/env bash
# Issue 21, acceptance 3, on the H200: `frugal report` for the DeepSeek-R1-Distill-Qwen-7B
# configuration with dummy weights (speed, memory and cost rows; marked "dummy weights" in the
# report) and for the reference model (models/reference-qwen2-20m: the rows quality columns
# come from once frugal eval is in the build). Each writes report.{md,json,html} under $OUT.
# Needs a built build-gpu (TARGETS=frugal bash scripts/gpu/check.sh build).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${OUT:-/tmp/frugal-out}"
mkdir -p "$OUT" /tmp/q7b
BUILD_DIR="${BUILD_DIR:-build-gpu}"
source scripts/gpu/lib.sh
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
F="$BUILD_DIR/src/cli/frugal"
t0=$SECONDS
"$F" report --dummy-weights /tmp/q7b/config.json --device cuda --gpu h200 \
  --out "$OUT/report-q7b-speed" ${REPORT_ARGS:-} >"$OUT/report-q7b-speed.txt" 2>&1
echo "== q7b speed rows (dummy weights): rc $? ($((SECONDS - t0)) s)"
tail -20 "$OUT/report-q7b-speed.txt"
# Quality: perplexity of the held-out War and Peace excerpt, MMLU 5-shot on the corpus's test
# subjects (data/corpus/mmlu.tar.xz).
mkdir -p /tmp/mmlu && tar -xJf data/corpus/mmlu.tar.xz -C /tmp/mmlu
t0=$SECONDS
"$F" report --model models/reference-qwen2-20m --device cuda --gpu h200 \
  --text tests/data/report/war-and-peace-excerpt.txt --mc /tmp/mmlu \
  --out "$OUT/report-reference-quality" ${REPORT_ARGS:-} >"$OUT/report-reference-quality.txt" 2>&1
echo "== reference model (quality rows): rc $? ($((SECONDS - t0)) s)"
tail -20 "$OUT/report-reference-quality.txt"
