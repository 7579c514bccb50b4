#!/usr/bin/env python3
"""One layer's kernel chain from a `frugal bench offline --kernel-trace` trace (.trace.json[.gz]):
each kernel's end relative to the layer's first kernel boundary, and how far it moves past the
one before ("adds"), as medians over the traced layers.
  chain.py --moe TRACE   V2-Lite batch 1: layers from one MoE down kernel to the next (those with
                         one tiny MoE gate_up kernel between: whatever kernels route);
  chain.py TRACE         a dense model: layers from one decode attention kernel to the next.
Session 62 made the H200 tables of docs/perf/2026-12-07-session62.md with it (run4/traces/)."""
import gzip, json, statistics, sys
from collections import defaultdict

args = [a for a in sys.argv[1:] if a != "--moe"]
moe = "--moe" in sys.argv
for path in args:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        ev = sorted((e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"), key=lambda e: e["ts"])
    end = lambda e: e["ts"] + e["dur"]
    mark = (lambda e: e["name"].startswith("moe::moe_tiny_down")) if moe else (lambda e: e["name"].startswith("attention_decode"))
    idx = [i for i, e in enumerate(ev) if mark(e)]
    ends, names = defaultdict(list), {}
    layers = 0
    for a, b in zip(idx, idx[1:]):
        seg = ev[a + 1:b + 1]
        if moe and sum(e["name"].startswith("moe::moe_tiny_gate_up") for e in seg) != 1:
            continue  # a step boundary, or not a MoE layer
        if not moe and len(seg) > 14:
            continue  # a step boundary
        layers += 1
        for k, e in enumerate(seg):
            ends[k].append(end(e) - end(ev[a]))
            names[k] = e["name"][:60] + str(e.get("args", {}).get("grid", ""))
    print(f"{path}: {layers} layers")
    prev = 0.0
    for k in sorted(ends):
        if len(ends[k]) < 0.8 * layers:
            continue
        m = statistics.median(ends[k])
        print(f"  {names[k]:72s} ends {m:8.2f}  adds {m - prev:6.2f}")
        prev = m
