#!/usr/bin/env bash
# Issue 16 acceptance 4: the CPU table of weight formats on the DeepSeek-R1-Distill-Qwen-1.5B shape.
# Builds nothing: runs an already built `frugal` binary.
#
#   scripts/bench_cpu_quant.sh [FRUGAL_BINARY] [OUT_DIR]
#     FRUGAL_BINARY  default build/src/cli/frugal
#     OUT_DIR        default build/bench-cpu-quant/<UTC time>
#   Environment: REPS (timed repetitions per point, default 5), WARMUP (default 1),
#   PRECISIONS (default "bf16 int8 int4"), CONFIGS (default: both configs below),
#   FRUGAL_THREADS (the engine's pool; default all cores).
#
# For each config x precision: `frugal bench offline --dummy-weights` with 64-token prefill and
# batch-1 decode of 32 tokens after a 64-token prompt; the bench measures the host read ceiling
# itself (bench::measure_host_read_gbps). Prints the CPU model, the load average around every run,
# a table, and writes OUT_DIR/summary.json (plus each run's full JSON and log).
#
# Configs: tests/data/shared/configs/deepseek-r1-distill-qwen-1.5b-vocab32000.json is the shape of
# llama.cpp's figures in ../shared/design/PERFORMANCE.md (32,000-token vocabulary); the real
# 151,936-token vocabulary (deepseek-r1-distill-qwen-1.5b.json) is run too. The goals (decode >=
# 1.2x, prefill >= 2x llama.cpp, INT8 against Q8_0 and INT4 against Q4_K_M, bf16 against F16 for
# reference) are checked on the 32k config only: that is where llama.cpp was measured.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${1:-$ROOT/build/src/cli/frugal}"
OUT="${2:-$ROOT/build/bench-cpu-quant/$(date -u +%Y%m%dT%H%M%SZ)}"
REPS="${REPS:-5}"
WARMUP="${WARMUP:-1}"
PRECISIONS="${PRECISIONS:-bf16 int8 int4}"
CFG_DIR="$ROOT/tests/data/shared/configs"
CONFIGS="${CONFIGS:-deepseek-r1-distill-qwen-1.5b-vocab32000 deepseek-r1-distill-qwen-1.5b}"

if [[ ! -x "$BIN" ]]; then
  echo "bench_cpu_quant: no frugal binary at $BIN (this script builds nothing; build the 'frugal' target first)" >&2
  exit 2
fi
command -v python3 >/dev/null || { echo "bench_cpu_quant: python3 is needed for the table" >&2; exit 2; }
for c in $CONFIGS; do
  [[ -f "$CFG_DIR/$c.json" ]] || { echo "bench_cpu_quant: missing config $CFG_DIR/$c.json" >&2; exit 2; }
done
mkdir -p "$OUT"

CPU_MODEL="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
CORES="$(nproc)"
FLAGS="$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_vnni|avx512_bf16|avx_vnni|amx_int8)$' | tr '\n' ' ')"
echo "cpu: $CPU_MODEL, $CORES cores (nproc), $FLAGS"
echo "binary: $BIN"
echo "out: $OUT"

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

for c in $CONFIGS; do
  for p in $PRECISIONS; do
    tag="$c.$p"
    la0="$(loadavg)"
    echo "== $tag (load average $la0)"
    "$BIN" bench offline --dummy-weights "$CFG_DIR/$c.json" --precision "$p" --device cpu \
      --prefill-lens 64 --batches 1 --decode-prompt-len 64 --decode-tokens 32 \
      --reps "$REPS" --warmup "$WARMUP" --json "$OUT/$tag.json" >"$OUT/$tag.log" 2>&1 || {
      echo "bench_cpu_quant: $tag failed; see $OUT/$tag.log" >&2
      tail -5 "$OUT/$tag.log" >&2
      exit 1
    }
    la1="$(loadavg)"
    printf '{"start": "%s", "end": "%s"}\n' "$la0" "$la1" >"$OUT/$tag.load.json"
  done
done

python3 - "$OUT" "$CPU_MODEL" "$CORES" "$FLAGS" "$CONFIGS" "$PRECISIONS" <<'EOF'
import json, os, sys
out, cpu, cores, flags, configs, precisions = sys.argv[1:7]
configs, precisions = configs.split(), precisions.split()
# llama.cpp on this machine kind, idle, 1.5B shape with a 32,000-token vocabulary
# (../shared/design/PERFORMANCE.md, measured 2026-12-01): pp64 and tg32 tok/s.
llama = {"bf16": ("F16", 89.3, 12.1), "int8": ("Q8_0", 69.5, 18.3), "int4": ("Q4_K_M", 49.3, 26.8)}
goal_prefill, goal_decode = 2.0, 1.2
rows = []
for c in configs:
    for p in precisions:
        j = json.load(open(os.path.join(out, f"{c}.{p}.json")))
        load = json.load(open(os.path.join(out, f"{c}.{p}.load.json")))
        pf = j["prefill"][0]
        dc = j["decode"][0]
        row = {
            "config": c, "precision": p,
            "prefill64_tok_s": pf["tok_per_s"]["median"], "prefill64_ci95": pf["tok_per_s"]["ci95"],
            "prefill_tflops": pf.get("tflops"),
            "decode_tok_s": dc["tok_per_s"]["median"], "decode_ci95": dc["tok_per_s"]["ci95"],
            "decode_bytes_per_step": dc["bytes_per_step"], "decode_gbps": dc["achieved_gbps"],
            "read_ceiling_gbps": j["ceilings"]["mem_gbps"],
            "decode_fraction_of_ceiling": dc["bandwidth_fraction_of_ceiling"],
            "load_average": load,
        }
        if c.endswith("vocab32000") and p in llama:
            name, lpp, ltg = llama[p]
            row["llama_cpp"] = {"format": name, "pp64": lpp, "tg32": ltg}
            row["prefill_vs_llama_cpp"] = row["prefill64_tok_s"] / lpp
            row["decode_vs_llama_cpp"] = row["decode_tok_s"] / ltg
            if p != "bf16":
                row["prefill_goal_met"] = row["prefill_vs_llama_cpp"] >= goal_prefill
                row["decode_goal_met"] = row["decode_vs_llama_cpp"] >= goal_decode
        rows.append(row)

print()
print(f"CPU: {cpu}, {cores} cores; {flags}")
print(f"{'config':<44} {'prec':<5} {'pp64 tok/s':>11} {'vs llama':>9} {'decode tok/s':>13} {'vs llama':>9} "
      f"{'GB/s':>6} {'ceiling':>8} {'of ceil':>8}  load (start/end)")
for r in rows:
    vp = f"{r['prefill_vs_llama_cpp']:.2f}x" if "prefill_vs_llama_cpp" in r else "-"
    vd = f"{r['decode_vs_llama_cpp']:.2f}x" if "decode_vs_llama_cpp" in r else "-"
    if "prefill_goal_met" in r:
        vp += "" if r["prefill_goal_met"] else "!"
        vd += "" if r["decode_goal_met"] else "!"
    print(f"{r['config']:<44} {r['precision']:<5} {r['prefill64_tok_s']:>11.1f} {vp:>9} {r['decode_tok_s']:>13.2f} "
          f"{vd:>9} {r['decode_gbps']:>6.1f} {r['read_ceiling_gbps']:>8.1f} {100 * r['decode_fraction_of_ceiling']:>7.0f}%  "
          f"{r['load_average']['start']} / {r['load_average']['end']}")
print("goals (32k config): prefill >= 2x and decode >= 1.2x llama.cpp (int8 vs Q8_0, int4 vs Q4_K_M); '!' marks a miss")
summary = {"cpu_model": cpu, "cores": int(cores), "cpu_flags": flags.split(),
           "llama_cpp_reference": {k: {"format": v[0], "pp64": v[1], "tg32": v[2]} for k, v in llama.items()},
           "goals": {"prefill_x": goal_prefill, "decode_x": goal_decode}, "rows": rows}
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2)
print(f"wrote {os.path.join(out, 'summary.json')}")
EOF
