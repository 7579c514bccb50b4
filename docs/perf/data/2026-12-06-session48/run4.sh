#!/usr/bin/env bash
# Session 48, run 4: decode attention's split rule, and the slab GEMM's split-k reduce.
# - Run 3 measured one split (no combine) faster than the wave rule's 7 / 2 splits at 16 / 64
#   sequences of ~544 keys (int4 +6.4% / +8.7%, bf16 +4.2% / +12.7%). The tree now gives each
#   (sequence, kv head) unit one block from a quarter of the SMs' worth of units
#   (decode_whole_units; FRUGAL_DECODE_WHOLE_UNITS=0 is the old rule): new against old at 4..64
#   sequences, the kernel sweep of split counts against the batch (cuda_kernel_bench
#   --decode-splits), the attention tests.
# - Run 2's traces put the slab GEMM's reduce kernels at 8.5% / 9% of an int4 step at 16 / 64
#   sequences. FRUGAL_QGEMM_REDUCE4=1 has the reduce read float4s streamed (opt-in), and
#   FRUGAL_QSLAB_MT caps the token tiles a pass (fewer slices, so fewer partials, for more passes
#   over the codes): both against the default, and the slab harness with the cap at 1.
# Run as: run(command: "bash docs/perf/data/2026-12-06-session48/run4.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s4.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_kernel_bench cuda_ops_test cuda_harness_test"; build; unset TARGETS
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
harness() { # name env: the slab GEMM's harness cases (every quantized matmul through it)
  local l=$(left); [ $l -gt 30 ] || { echo "$1: no time ($l s)" >>$S; return; }
  (env $2 timeout $((l < 100 ? l - 5 : 100)) build-gpu/tests/cuda/cuda_harness_test --gtest_filter='*Slab*Matmul*' >$L/$1.log 2>&1; echo "$1 rc $? ($((SECONDS-START)) s)" >>$S)
  grep -E "FAILED|PASSED" $L/$1.log | head -6 >>$S
}
for b in 16 64; do
  e2e int4_b${b}_new /tmp/q7b "" $B --batches $b --precision int4
  e2e int4_b${b}_reduce4 /tmp/q7b "FRUGAL_QGEMM_REDUCE4=1" $B --batches $b --precision int4
done
harness slab_harness_reduce4 "FRUGAL_QGEMM_REDUCE4=1"
l=$(left); [ $l -gt 30 ] && { (timeout $((l < 100 ? l - 5 : 100)) build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaAttention.*' >$L/attn.log 2>&1; echo "attention tests rc $? ($((SECONDS-START)) s)" >>$S); grep -E "FAILED|Failure|PASSED" $L/attn.log | head -8 >>$S; }
e2e int4_b16_mt1 /tmp/q7b "FRUGAL_QSLAB_MT=1" $B --batches 16 --precision int4
e2e int4_b64_mt4 /tmp/q7b "FRUGAL_QSLAB_MT=4" $B --batches 64 --precision int4
harness slab_harness_mt1 "FRUGAL_QSLAB_MT=1"
e2e bf16_b16_new /tmp/q7b "" $B --batches 16
e2e bf16_b64_new /tmp/q7b "" $B --batches 64
l=$(left); [ $l -gt 40 ] && { (timeout 40 build-gpu/tests/cuda/cuda_kernel_bench --decode-splits >$L/splits.txt 2>&1; echo "kbench splits rc $? ($((SECONDS-START)) s)" >>$S); grep -E "decode splits" $L/splits.txt >>$S; }
e2e int4_b64_mt2 /tmp/q7b "FRUGAL_QSLAB_MT=2" $B --batches 64 --precision int4
for b in 8 32 4; do
  e2e int4_b${b}_new /tmp/q7b "" $B --batches $b --precision int4
  e2e int4_b${b}_old /tmp/q7b "FRUGAL_DECODE_WHOLE_UNITS=0" $B --batches $b --precision int4
done
finish 4
