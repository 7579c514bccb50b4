#!/usr/bin/env bash
# frugal quantize on the GPU machine's host (the quantizer runs on the CPU: 16 cores): writes a
# random-weight checkpoint of a catalog shape with transformers (make_7b_checkpoint.py), adds
# the Qwen tokenizer from .devcarry/q7b_tok (carry: [".devcarry"]), and times RTN, AWQ and GPTQ
# int4 with /usr/bin/time -v (wall time and peak RSS); logs and the report tables under $OUT.
#   bash scripts/gpu/quantize.sh [CATALOG_NAME] [CALIB_TOKENS]
# (default deepseek-r1-distill-qwen-1.5b, 256). Needs `bash scripts/gpu/check.sh build` first
# (TARGETS=frugal is enough). Each method is bounded by QUANT_TIMEOUT seconds (default 500).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${OUT:-/tmp/frugal-out}"
mkdir -p "$OUT"
NAME="${1:-deepseek-r1-distill-qwen-1.5b}"
TOKENS="${2:-256}"
FRUGAL="${BUILD_DIR:-build-gpu}/src/cli/frugal"
CKPT="/tmp/quant_src_$NAME"
TABLE="$OUT/quantize_summary.txt"
: >"$TABLE"
if [ ! -f "$CKPT/config.json" ]; then
  python3 scripts/gpu/make_7b_checkpoint.py "data/catalog/models/$NAME.json" "$CKPT" >"$OUT/quantize_ckpt.txt" 2>&1 || {
    echo "checkpoint failed"; tail -20 "$OUT/quantize_ckpt.txt"; exit 1; }
  cp .devcarry/q7b_tok/* "$CKPT/" 2>/dev/null || echo "no .devcarry/q7b_tok: calibration needs a tokenizer" | tee -a "$TABLE"
fi
nproc | sed 's/^/cores: /' >>"$TABLE"
for m in rtn awq gptq; do
  rm -rf "/tmp/quant_out_$m"
  FRUGAL_THREADS="$(nproc)" timeout "${QUANT_TIMEOUT:-500}" /usr/bin/time -v "$FRUGAL" quantize --model "$CKPT" \
    --format int4 --method "$m" --calib-tokens "$TOKENS" --out "/tmp/quant_out_$m" \
    >"$OUT/quantize_$m.txt" 2>"$OUT/quantize_${m}_time.txt"
  rc=$?
  echo "$NAME int4 $m ($TOKENS calibration tokens): rc $rc" >>"$TABLE"
  grep -E "Elapsed \(wall|Maximum resident" "$OUT/quantize_${m}_time.txt" >>"$TABLE"
  tail -2 "$OUT/quantize_$m.txt" >>"$TABLE"
done
echo "===== quantize summary ====="
cat "$TABLE"
