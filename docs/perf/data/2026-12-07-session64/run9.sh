#!/usr/bin/env bash
# Session 64, run 9 (built, not run: the device time was spent on runs 7 and 8). One call on the
# tree as committed, nothing applied:
# 1. The whole tree built, then `ctest -L cuda` (issue 18.1; last run whole in session 50, 205/205,
#    and many kernels have landed since; individual op tests have run each session).
# 2. The fused routers with their PDL trigger moved after the router rows are read (moe.cu,
#    this session; cuda_backend.h says why): V2-Lite batch 1, base / FRUGAL_FUSE_ROUTE=3 (grid
#    router, last block routes) / =1 (cluster router with the norm inside), two rounds. With the
#    trigger at the wait they measured -6.1% / -11.8% (H100, session 64). Predicted: mode 3
#    about +1-3% over base (one kernel boundary fewer, the route kernel's; the router rows no
#    longer meet the MoE kernel's early loads), mode 1 unclear (its cluster still needs 8 free
#    SMs of one GPC under the o GEMV). And FRUGAL_MLA_UV_LATE_TRIGGER=1: mla_combine_uv lets the
#    o GEMV launch only once its partials are read (predicted within +-2%: the combine's reads no
#    longer meet the o GEMV's 8 MB of early row loads, which alone make that GEMV no faster).
# 3. A kernel trace of mode 3 (its layer chain), then, on an H200 and if time is left, the
#    issue points of 18.2 / 18.3 / 19.3 on this tree.
# Run as: run(command: "STOP=560 bash docs/perf/data/2026-12-07-session64/run9.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s9.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
build
gtests router_tests cuda/cuda_ops_test 'CudaFused.MoeRouter*:CudaFused.MoeBlock*' 60
l=$(left); t=$((l - 200)); [ $t -gt 240 ] && t=240
if [ $t -gt 60 ]; then
  (cd build-gpu && timeout $t ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
  grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -16 >>$S
fi
for r in 1 2; do
  v2l_b1 v2l_base_$r ""
  v2l_b1 v2l_route3_$r FRUGAL_FUSE_ROUTE=3
  v2l_b1 v2l_route1_$r FRUGAL_FUSE_ROUTE=1
  v2l_b1 v2l_uvlate_$r FRUGAL_MLA_UV_LATE_TRIGGER=1
done
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
[ $(left) -gt 60 ] && { trace v2l_route3_tr /tmp/v2l FRUGAL_FUSE_ROUTE=3 $V --batches 1
  t=$L/trace_v2l_route3_tr/decode_b1.trace.json
  [ -f $t ] && python3 docs/perf/data/2026-12-07-session62/chain.py --moe $t | head -16 >>$S 2>&1; }
if grep -q H200 $S; then  # re-takes the issue points only if time is left
  B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
  B1="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
  for prec in int4 int8 fp8-channel; do e2e ${prec}_b1 /tmp/q7b "" $B1 --batches 1 --precision $prec; done
  e2e bf16_b1 /tmp/q7b "" $B1 --batches 1
  for b in 16 64; do e2e int4_b$b /tmp/q7b "" $B --batches $b --precision int4; e2e bf16_b$b /tmp/q7b "" $B --batches $b; done
fi
finish 9
