#!/usr/bin/env bash
# frugal quantize on the GPU machine: writes a random-weight checkpoint of a catalog shape with
# transformers (make_7b_checkpoint.py), adds a tokenizer, and times each method (int4) with
# /usr/bin/time -v (wall time and peak RSS); under $OUT: quantize_summary.txt and per method
# quantize_<m>.txt (report table, per-layer progress, time -v).
#   bash scripts/gpu/quantize.sh [CATALOG_NAME] [CALIB_TOKENS]
# (default deepseek-r1-distill-qwen-7b, 512). Needs `bash scripts/gpu/check.sh build` first
# (TARGETS=frugal is enough). Environment:
#   QUANT_METHODS="awq gptq"   methods to time (rtn too if named)
#   QUANT_DEVICE=auto          frugal quantize --device (auto: cuda when a GPU is present)
#   QUANT_TIMEOUT=500          seconds per method
#   QUANT_TOKENIZER=DIR        tokenizer files; default .devcarry/q7b_tok when present (the real
#                              Qwen tokenizer), else the reference model's (models/reference-qwen2-20m:
#                              8192 ids, all inside the 7B's embedding table)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # the repository root as working directory; ROOT, OUT, BUILD_DIR
NAME="${1:-deepseek-r1-distill-qwen-7b}"
TOKENS="${2:-512}"
FRUGAL="${BUILD_DIR:-build-gpu}/src/cli/frugal"
CKPT="/tmp/quant_src_$NAME"
TABLE="$OUT/quantize_summary.txt"
: >"$TABLE"
TOK="${QUANT_TOKENIZER:-}"
if [ -z "$TOK" ]; then
  if [ -d .devcarry/q7b_tok ]; then TOK=.devcarry/q7b_tok; else TOK=models/reference-qwen2-20m; fi
fi
if [ ! -f "$CKPT/config.json" ]; then
  t0=$SECONDS
  python3 scripts/gpu/make_7b_checkpoint.py "data/catalog/models/$NAME.json" "$CKPT" >"$OUT/quantize_ckpt.txt" 2>&1 || {
    echo "checkpoint failed"; tail -20 "$OUT/quantize_ckpt.txt"; exit 1; }
  echo "checkpoint: $((SECONDS - t0)) s, $(du -sh "$CKPT" | cut -f1)" >>"$TABLE"
fi
cp "$TOK"/tokenizer.json "$TOK"/tokenizer_config.json "$CKPT/" 2>/dev/null || { echo "no tokenizer in $TOK" | tee -a "$TABLE"; exit 1; }
echo "tokenizer: $TOK; calibration: data/calib/war-and-peace-ch1-3.txt, $TOKENS tokens" >>"$TABLE"
echo "cores: $(nproc); GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" >>"$TABLE"
for m in ${QUANT_METHODS:-awq gptq}; do
  rm -rf "/tmp/quant_out_$m"
  FRUGAL_THREADS="$(nproc)" timeout "${QUANT_TIMEOUT:-500}" /usr/bin/time -v "$FRUGAL" quantize --model "$CKPT" \
    --format int4 --method "$m" --calib-tokens "$TOKENS" --device "${QUANT_DEVICE:-auto}" --out "/tmp/quant_out_$m" \
    >"$OUT/quantize_$m.txt" 2>&1
  rc=$?
  echo "$NAME int4 $m ($TOKENS calibration tokens): rc $rc" >>"$TABLE"
  grep -E "Elapsed \(wall|Maximum resident|Percent of CPU" "$OUT/quantize_$m.txt" >>"$TABLE"
  [ $rc -eq 0 ] || grep -E "^quantize: |frugal quantize: " "$OUT/quantize_$m.txt" | tail -3 >>"$TABLE"
  grep -E "layer 0 total|layer 27 total" "$OUT/quantize_$m.txt" >>"$TABLE"
  tail -2 "$OUT/quantize_$m.txt" >>"$TABLE"
  du -sh "/tmp/quant_out_$m" 2>/dev/null >>"$TABLE"
  rm -rf "/tmp/quant_out_$m"
done
echo "===== quantize summary ====="
cat "$TABLE"
