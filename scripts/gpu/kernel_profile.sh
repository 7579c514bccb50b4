#!/usr/bin/env bash
# Where a decode step's time goes, kernel by kernel, on the GPU machine (Nsight Compute's
# gpu__time_duration of every launch, clocks left alone). Runs `frugal bench offline` with dummy
# weights of a catalog config cut to LAYERS layers (per-layer kernels are the same at any depth;
# the lm_head and sampling appear once a step) and ranks the kernels of the decode steps.
#   bash scripts/gpu/kernel_profile.sh CATALOG_NAME LAYERS BATCH [DECODE_TOKENS]
# DECODE_PROMPT (default 128) is the decode steps' prompt length (32768: decode at a 32k context);
# PRECISION (default bf16) the dummy weights' --precision (int4, fp8, fp8-channel, ...).
# Writes $OUT/prof_NAME_bBATCH.{csv,txt}. Needs a built build-gpu (scripts/gpu/check.sh build).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # the repository root as working directory; ROOT, OUT, BUILD_DIR
NAME=$1 LAYERS=$2 BATCH=$3 TOKENS=${4:-8}
DIR=/tmp/prof_$NAME
catalog_config "$NAME" "$DIR"
python3 - "$DIR/config.json" "$LAYERS" <<'EOF'
import json, sys
p, n = sys.argv[1], int(sys.argv[2])
c = json.load(open(p))
c["num_hidden_layers"] = n
json.dump(c, open(p, "w"), indent=1)
EOF
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu"; exit 1; }
TAG="prof_${NAME}_b${BATCH}${DECODE_PROMPT:+_ctx$DECODE_PROMPT}${PRECISION:+_$PRECISION}"
# Steps of the bench: prefill of BATCH prompts, then TOKENS decode steps; the ranking keeps the
# launches after the last prefill-sized attention, which the summary below finds by step marks.
# BATCH "pN": one N-token prefill instead of decode steps (its step is the one ranked).
if [[ $BATCH == p* ]]; then
  ARGS=(--prefill-lens "${BATCH#p}" --batches 0 --reps 1 --warmup 0)
else
  ARGS=(--prefill-lens 0 --batches "$BATCH" --decode-prompt-len "${DECODE_PROMPT:-128}" --decode-tokens "$TOKENS" --reps 1 --warmup 0
        --max-num-seqs "$BATCH")
fi
"$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$OUT/$TAG.csv" \
  "$BUILD_DIR/src/cli/frugal" bench offline --dummy-weights "$DIR/config.json" --device cuda --precision "${PRECISION:-bf16}" "${ARGS[@]}" \
  >"$OUT/$TAG.bench.txt" 2>&1
echo "ncu rc $?"
python3 - "$OUT/$TAG.csv" "$TOKENS" "$LAYERS" "$BATCH" >"$OUT/$TAG.txt" <<'EOF'
import csv, sys, collections
path, tokens, layers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = []
with open(path) as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    v = float(r["Metric Value"].replace(",", ""))
    unit = r.get("Metric Unit", "ns")
    us = v / 1000 if unit in ("nsecond", "ns") else v if unit in ("usecond", "us") else v * 1000
    rows.append((r["Kernel Name"], r.get("Grid Size", ""), r.get("Block Size", ""), us))
print(f"{len(rows)} launches profiled")
# Steps end at the sampling kernel (grid x = the step's sequences). Decode steps of BATCH
# sequences are the steps whose sample grid is BATCH and that hold no prefill attention; the
# first of them (graph capture) is left out.
prefill = sys.argv[4].startswith("p")
batch = 1 if prefill else int(sys.argv[4])
steps_l, cur = [], []
for r in rows:
    cur.append(r)
    if "sample_kernel" in r[0]:
        steps_l.append(cur); cur = []
if cur:
    steps_l.append(cur)
def is_decode(st):
    g = st[-1][1].strip("()").split(",")[0].strip()
    return g == str(batch) and not any("attention_generic" in x[0] or "attention_prefill" in x[0] for x in st)
dsteps = [st for st in steps_l if is_decode(st)][1:]
if prefill:
    dsteps = [st for st in steps_l if not is_decode(st)][-1:]
if not dsteps:
    dsteps = steps_l[-1:] or [rows]
dec = [r for st in dsteps for r in st]
steps = len(dsteps)
tot = sum(r[3] for r in dec)
print(f"decode: {steps:.0f} steps, {len(dec) / steps:.0f} launches and {tot / steps:.1f} us of kernel time a step ({layers} layers)")
agg = collections.defaultdict(lambda: [0, 0.0, set()])
for name, grid, block, us in dec:
    short = name.split("(")[0][:70] + " " + grid
    a = agg[short]
    a[0] += 1; a[1] += us; a[2].add(grid + "x" + block)
print(f"{'kernel grid':90s} {'launches/step':>13s} {'us/step':>9s} {'%':>5s}  shapes")
for k, (n, us, shapes) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    print(f"{k:90s} {n / steps:13.1f} {us / steps:9.1f} {100 * us / tot:5.1f}  {' '.join(sorted(shapes))[:80]}")
EOF
cat "$OUT/$TAG.txt" | head -45
