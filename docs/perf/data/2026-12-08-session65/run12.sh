#!/usr/bin/env bash
# Session 65, run 12. One call on the tree with FRUGAL_ROUTE_LATE_TRIGGER (moe.cu, an A/B knob):
# 1. The whole tree built; the quantized-model fixtures against transformers
#    (cuda_quant_model_test: run 9's `ctest -L cuda` ran without tests/data/quant, which the
#    device copy had left out for size; here golden / golden_bf16 are left out instead and no
#    other test runs from them); the router bits tests with the knob on (all three fused modes
#    and the three-op sequence against each other).
# 2. V2-Lite batch 1, two rounds: base / FRUGAL_ROUTE_LATE_TRIGGER=1 (the route kernel lets gate_up
#    launch only after its routing) / the same with FRUGAL_FUSE_ROUTE=3, =1 and =2. Run 9's trace
#    of mode 3: the grid router adds 13.8 us where the router GEMV and the route kernel add 3.2 +
#    4.5; the reading is that everything the router touches after its trigger (x, the logits'
#    round trip, the outputs) queues behind gate_up's ~23 MB of early loads. Predicted: the
#    sequence +-1% (the route's 4.5 us shrinks, gate_up's early loads overlap less), mode 3 at
#    or above base (about +2%: one kernel boundary fewer), mode 1 unclear (its cluster).
# 3. A trace of the best fused mode with the knob (its layer chain).
# SHORT=1 leaves modes 1 and 2 out (a short device budget).
# Run as: run(command: "STOP=520 bash docs/perf/data/2026-12-08-session65/run12.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s12.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
build
ls tests/data/quant >>$S 2>&1
gtests quant_fixtures cuda/cuda_quant_model_test '*' 150 40
export FRUGAL_ROUTE_LATE_TRIGGER=1
gtests router_late cuda/cuda_ops_test 'CudaFused.MoeRouter*:CudaFused.MoeBlock*' 60
unset FRUGAL_ROUTE_LATE_TRIGGER
for r in 1 2; do
  v2l_b1 v2l_base_$r ""
  v2l_b1 v2l_late_$r FRUGAL_ROUTE_LATE_TRIGGER=1
  v2l_b1 v2l_r3late_$r "FRUGAL_ROUTE_LATE_TRIGGER=1 FRUGAL_FUSE_ROUTE=3"
  [ -z "$SHORT" ] && v2l_b1 v2l_r1late_$r "FRUGAL_ROUTE_LATE_TRIGGER=1 FRUGAL_FUSE_ROUTE=1"
  [ -z "$SHORT" ] && v2l_b1 v2l_r2late_$r "FRUGAL_ROUTE_LATE_TRIGGER=1 FRUGAL_FUSE_ROUTE=2"
done
best=$(for v in late r3late r1late r2late; do for r in 1 2; do
  python3 -c "import json,sys; d=json.load(open('$L/v2l_${v}_$r.json')); print(d['decode'][0]['tok_per_s']['median'], '$v')" 2>/dev/null; done; done | sort -g | tail -1 | cut -d' ' -f2)
echo "best: $best" >>$S
declare -A envs=([late]="FRUGAL_ROUTE_LATE_TRIGGER=1" [r3late]="FRUGAL_ROUTE_LATE_TRIGGER=1 FRUGAL_FUSE_ROUTE=3" \
  [r1late]="FRUGAL_ROUTE_LATE_TRIGGER=1 FRUGAL_FUSE_ROUTE=1" [r2late]="FRUGAL_ROUTE_LATE_TRIGGER=1 FRUGAL_FUSE_ROUTE=2")
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
[ -n "$best" ] && [ $(left) -gt 60 ] && { trace v2l_${best}_tr /tmp/v2l "${envs[$best]}" $V --batches 1
  t=$L/trace_v2l_${best}_tr/decode_b1.trace.json
  [ -f $t ] && python3 docs/perf/data/2026-12-07-session62/chain.py --moe $t | head -16 >>$S 2>&1; }
finish 12
