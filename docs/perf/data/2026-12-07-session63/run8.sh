#!/usr/bin/env bash
# Session 63, run 8 (built, not run: no device was lent this session): after run7.sh, on the same
# warm machine (its build-gpu, run7.diff applied, stays; no build here). Kernel traces for the
# accounting of what run 7 leaves:
#  - 7B int4 at 64 sequences with PDL off (FRUGAL_PDL=0) against on: decode attention took
#    +5.9 us a layer in the int4 step (same kernel, same cache; session 62 run 4). If the gap is
#    the early-launched neighbours (the split RoPE before it, the o GEMM after it, both under PDL;
#    the bf16 step's cuBLAS kernels do not overlap), it goes with PDL off.
#  - 7B int4 and bf16 at 16 sequences (18.3's 2.5x point): the layer chains on the H200.
#  - V2-Lite batch 1 with $V2ENV (run 7's winners): the layer chain.
#  - The dense GEMV alone on V2-Lite's q | kv_a (3648 x 2048, 15 MB) and o (2048 x 2048, 8 MB):
#    in the step (session 62, H200) o adds 5.2 us for 8 MB (1.6 TB/s) and q | kv_a 6.1 for 15
#    (2.5 TB/s), though each warp's whole row is requested before the PDL wait. Alone, back to
#    back, with k split 2 or 4 ways and without early loads: whether the kernel or its place in
#    the chain holds them back.
# Run as: run(command: "V2ENV='...' Q4ENV='...' STOP=200 bash docs/perf/data/2026-12-07-session63/run8.sh", carry: [".devcarry"])
# with V2ENV / Q4ENV the switches run 7 found faster (empty: the defaults).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s8.txt
V2ENV=${V2ENV:-}
Q4ENV=${Q4ENV:-}
C=docs/perf/data/2026-12-07-session62/chain.py
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
nvidia-smi --query-gpu=name --format=csv,noheader >>$S
[ -x build-gpu/src/cli/frugal ] || { echo "no build here" >>$S; finish 8; exit 1; }
chain() { local t=$L/trace_$1/$2.trace.json; [ -f $t ] && python3 $C $3 $t | tail -n +1 | head -24 >>$S 2>&1; }
trace v2l_tr /tmp/v2l "$V2ENV" $V --batches 1; chain v2l_tr decode_b1 --moe
trace int4_b64_nopdl /tmp/q7b "$Q4ENV FRUGAL_PDL=0" $B --batches 64 --precision int4; chain int4_b64_nopdl decode_b64
trace int4_b64_tr /tmp/q7b "$Q4ENV" $B --batches 64 --precision int4; chain int4_b64_tr decode_b64
trace int4_b16_tr /tmp/q7b "$Q4ENV" $B --batches 16 --precision int4; chain int4_b16_tr decode_b16
trace bf16_b16_tr /tmp/q7b "" $B --batches 16; chain bf16_b16_tr decode_b16
l=$(left); [ $l -gt 20 ] && { timeout $((l-5)) build-gpu/tests/cuda/cuda_kernel_bench --gemv >$L/gemv.txt 2>&1
  grep -E "copy|v2-lite" $L/gemv.txt | head -30 >>$S; }
finish 8
