#!/usr/bin/env bash
# Session 65, run 12 (built, not run: no machine could be started after run 11). One call on the
# tree with FRUGAL_ROUTE_LATE_TRIGGER (moe.cu, an A/B knob):
# 1. The whole tree built; `ctest -L cuda` whole, with tests/data/quant and tests/data/golden in
#    the device copy (run 9's copy had left tests/data/quant out for size, so its one failure was
#    the quant fixtures' suite with no instances; both directories fit the 64 MiB copy, 60 MB with
#    the tree, once models/reference-qwen2-20m, tests/data/shared and tests/data/eval_oracle are
#    left out); the router bits tests with the knob on (the three fused modes and the three-op
#    sequence against each other).
# 2. V2-Lite batch 1, two rounds: base / FRUGAL_ROUTE_LATE_TRIGGER=1 (the route kernel lets gate_up
#    launch only after its routing) / the same with FRUGAL_FUSE_ROUTE=3, =1 and =2. Run 9's trace
#    of mode 3: the grid router adds 13.8 us where the router GEMV and the route kernel add 3.2 +
#    4.5; the reading is that everything the router touches after its trigger (x, the logits'
#    round trip, the outputs) queues behind gate_up's ~23 MB of early loads. Predicted: the
#    sequence +-1% (the route's 4.5 us shrinks, gate_up's early loads overlap less), mode 3 at
#    or above base (about +2%: one kernel boundary fewer), mode 1 unclear (its cluster).
# 3. A trace of the best variant with the knob (its layer chain).
# SHORT=1 leaves modes 1 and 2 out and the ctest to the quant fixtures (a short device budget).
# Run as: run(command: "STOP=560 bash docs/perf/data/2026-12-08-session65/run12.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s12.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
build
ls -d tests/data/quant tests/data/golden >>$S 2>&1
gtests quant_fixtures cuda/cuda_quant_model_test '*' 60 40
if [ -z "$SHORT" ]; then
  l=$(left); t=$((l - 240)); [ $t -gt 220 ] && t=220
  if [ $t -gt 60 ]; then
    (cd build-gpu && timeout $t ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
    grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -16 >>$S
  fi
fi
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
