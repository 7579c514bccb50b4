#!/usr/bin/env bash
# Kernel time against the gaps between kernels in graph-replayed decode steps (Nsight Systems,
# --cuda-graph-trace=node): for each decode step, the sum of its kernels' durations and the span
# from its first kernel's start to its last one's end. Usage: bash gaps.sh CONFIG_DIR TAG [bench args...]
# Writes $L/gaps_TAG.{nsys-rep,csv,txt}; prints the summary.
set -uo pipefail
CFG=$1 TAG=$2; shift 2
L=${L:-/tmp/logs}; mkdir -p $L
NSYS=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1)
[ -n "$NSYS" ] || { echo "gaps $TAG: no nsys"; exit 0; }
"$NSYS" profile -o $L/gaps_$TAG --force-overwrite true --cuda-graph-trace=node --trace=cuda \
  build-gpu/src/cli/frugal bench offline --device cuda --dummy-weights $CFG/config.json "$@" >$L/gaps_$TAG.bench.txt 2>&1
"$NSYS" stats --report cuda_gpu_trace --format csv --output $L/gaps_$TAG $L/gaps_$TAG.nsys-rep >/dev/null 2>&1
python3 - $L/gaps_${TAG}_cuda_gpu_trace.csv <<'PY' | tee $L/gaps_$TAG.txt
import csv, sys, statistics
rows = list(csv.DictReader(open(sys.argv[1])))
ks = []
for r in rows:
    name = r.get("Name", "")
    if "[CUDA mem" in name or not r.get("Duration (ns)"):
        continue
    ks.append((int(r["Start (ns)"]), int(r["Duration (ns)"]), name))
ks.sort()
# Steps end at the sampling kernel.
steps, cur = [], []
for k in ks:
    cur.append(k)
    if "sample" in k[2]:
        steps.append(cur); cur = []
steps = [s for s in steps if len(s) > 20][2:]  # skip prefill and capture
if not steps:
    print("no decode steps found"); sys.exit(0)
busy = [sum(d for _, d, _ in s) for s in steps]
span = [s[-1][0] + s[-1][1] - s[0][0] for s in steps]
n = [len(s) for s in steps]
print(f"decode steps {len(steps)}, kernels a step {statistics.median(n):.0f}")
print(f"median step span {statistics.median(span)/1e3:.1f} us, kernel time {statistics.median(busy)/1e3:.1f} us, "
      f"gaps {statistics.median([a-b for a,b in zip(span,busy)])/1e3:.1f} us ({100*(1-statistics.median(busy)/statistics.median(span)):.1f}%)")
# Overlap (PDL) makes busy > span possible; the top kernels by time of the median step:
s = steps[len(steps)//2]
agg = {}
for _, d, name in s:
    key = name.split("(")[0][:90]
    agg[key] = agg.get(key, (0, 0)); agg[key] = (agg[key][0] + d, agg[key][1] + 1)
for key, (d, c) in sorted(agg.items(), key=lambda x: -x[1][0])[:14]:
    print(f"{d/1e3:9.1f} us {c:4d}x  {key}")
PY
