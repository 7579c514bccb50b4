#!/usr/bin/env python3
"""Splits each MoE layer of a V2-Lite batch-1 kernel trace (frugal bench offline --kernel-trace,
its *.trace.json or .trace.json.gz) at kernel ends, medians over the traced replays:
  attention part: the previous MoE down kernel's end -> the end of the attention part's last
                  kernel (the persistent kernel, or the o projection's GEMV in the sequence);
  router:         that end -> moe_route_kernel's end (norm, router GEMV, route);
  MoE:            the route's end -> the MoE down kernel's end.
Usage: layer_split.py TRACE..."""
import gzip, json, statistics, sys


def events(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    return sorted(ev, key=lambda e: e["ts"])


def split(ev):
    end = lambda e: e["ts"] + e["dur"]
    is_down = lambda e: e["name"].startswith("moe::moe_tiny_down")
    rows = []
    downs = [i for i, e in enumerate(ev) if is_down(e)]
    for a, b in zip(downs, downs[1:]):
        route = [i for i in range(a + 1, b) if ev[i]["name"] == "moe_route_kernel"]
        if len(route) != 1:
            continue  # a step boundary, or not a MoE layer
        r = route[0]
        # The attention part ends with the last kernel before the router's norm and GEMV.
        attn_end = max(end(ev[i]) for i in range(a + 1, r - 2))  # r - 2, r - 1: the norm, the GEMV
        rows.append((attn_end - end(ev[a]), end(ev[r]) - attn_end, end(ev[b]) - end(ev[r])))
    return rows


for path in sys.argv[1:]:
    rows = split(events(path))
    med = [statistics.median(c) for c in zip(*rows)]
    print(f"{path}: {len(rows)} MoE layers; attention {med[0]:.1f} us, router {med[1]:.1f}, MoE {med[2]:.1f}, "
          f"layer {sum(med):.1f} (sum of medians)")
