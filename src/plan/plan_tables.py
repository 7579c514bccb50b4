#!/usr/bin/env python3
"""Generates the worked-example tables of docs/plan.md by running the real `frugal plan --json`.

usage: python3 src/plan/plan_tables.py BUILD_DIR/src/cli/frugal > tables.md
"""
import json
import subprocess
import sys

FRUGAL = sys.argv[1] if len(sys.argv) > 1 else "build/src/cli/frugal"
MODELS = ["deepseek-r1-distill-llama-70b", "deepseek-llm-67b"]
SETUPS = [("rtx-4090", 1), ("rtx-4090", 2), ("a100-80gb", 1), ("h100-sxm", 1), ("h200", 1)]
PRECISIONS = ["int4", "int8", "bf16"]


def plan(model, gpu, gpus, precision, concurrency=1):
    cmd = [FRUGAL, "plan", "--model", model, "--gpu", gpu, "--gpus", str(gpus), "--precision", precision,
           "--context", "4096", "--concurrency", str(concurrency), "--json"]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def row(model, gpu, gpus, precision):
    p = plan(model, gpu, gpus, precision)
    m, s, c = p["memory"], p["speed"], p["cost"]
    gib = m["weights_bytes"] / 2**30
    if not p["fits"]:
        return f"| {gpus} x {gpu} | {precision} | no (smallest: {p['smallest_fitting_gpus'] or '>8'} GPUs) " \
               f"| {gib:.1f} | - | - | - | - | - | - |"
    conc = max(1, m["max_concurrency"])
    q = plan(model, gpu, gpus, precision, conc)
    return (f"| {gpus} x {gpu} | {precision} | yes | {gib:.1f} | {m['max_context_batch1']:,} "
            f"| {s['decode_b1_tok_per_s']:.1f} | ${c['usd_per_m_tokens_b1']:.2f} | {conc:,} "
            f"| {q['speed']['decode_tok_per_s_at_concurrency']:,.0f} | ${q['cost']['usd_per_m_tokens_concurrency']:.3f} |")


for model in MODELS:
    print(f"\n#### {model} (context 4,096, KV bf16, catalog prices)\n")
    print("| GPUs | weights | fits | weights GiB/GPU | max context (batch 1) | decode tok/s (batch 1) "
          "| $/1M tok (batch 1) | max concurrency at 4k | decode tok/s at that concurrency | $/1M tok there |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for gpu, gpus in SETUPS:
        for precision in PRECISIONS:
            print(row(model, gpu, gpus, precision))
