#!/usr/bin/env bash
# Session 46's last script, NOT YET RUN (the device tool started no machine after run 1): the
# lean GEMV's shared-memory ring, ring.diff beside this script, applied here first; it lands only
# if these tests pass and it is faster. FRUGAL_QGEMV_RING=3|5 (set_quant_gemv_ring): each lane
# copies its two 16-byte chunks of a quad by cp.async into a per-warp ring of 3 / 5 quads in
# shared memory and reads back only what it copied (no barrier: its own cp.async.wait_group), in
# place of the register double buffer, so D - 1 quads a warp are in flight without registers.
# Same quads, order and arithmetic: the same bits as the lean / tile GEMV. Order: the 7B int4
# batch-1 A/B first, then the GEMV tests with the ring variants (bit for bit the tile GEMV's;
# the tiled codes through the ring), int8 / fp8 batch 1, the fixtures against transformers with
# the ring as the default (cuda_quant_model_test), the kernel rows (CHECK ring against the
# registers, qgemv-ring* beside qgemv-lean*) and int4 at 4 / 8 sequences.
# Run as: run(command: "bash docs/perf/data/2026-12-05-session46/run2.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
patch -p1 <docs/perf/data/2026-12-05-session46/ring.diff >$L/patch.log 2>&1; echo "ring.diff rc $?" >>$S
export TARGETS="frugal cuda_ops_test cuda_kernel_bench cuda_quant_model_test"; build; unset TARGETS
B="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
for r in 0 3; do e2e int4_b1_ring$r /tmp/q7b "FRUGAL_QGEMV_RING=$r" $B --batches 1 --precision int4; done
(timeout $(( $(left) > 150 ? 150 : $(left) > 5 ? $(left) : 5 )) build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaInt4Tiles8.*:CudaQuantGemv.*' \
  >$L/tests.log 2>&1; echo "ring tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|OK \]|differ|Expected" $L/tests.log | head -14 >>$S
for p in int8 fp8-channel; do
  for r in 0 3; do e2e ${p}_b1_ring$r /tmp/q7b "FRUGAL_QGEMV_RING=$r" $B --batches 1 --precision $p; done
done
for p in int4 int8 fp8-channel; do e2e ${p}_b1_ring5 /tmp/q7b "FRUGAL_QGEMV_RING=5" $B --batches 1 --precision $p; done
for r in 3 5; do
  [ $(left) -gt 30 ] || { echo "cuda_quant_model_test ring $r: no time" >>$S; continue; }
  (FRUGAL_QGEMV_RING=$r timeout 100 build-gpu/tests/cuda/cuda_quant_model_test >$L/qmodel_ring$r.log 2>&1; echo "cuda_quant_model_test ring $r rc $?" >>$S)
  grep -E "FAILED|PASSED|tests ran" $L/qmodel_ring$r.log | head -4 >>$S
done
for sh in "int4g128 gate" "int4g128 down" "int8 gate" "fp8b128 gate"; do
  f=$L/kb_${sh// /_}.txt
  [ $(left) -gt 60 ] || { echo "kbench $sh: no time" >>$S; continue; }
  (FRUGAL_QBENCH_ONLY="$sh" timeout 70 build-gpu/tests/cuda/cuda_kernel_bench --quant >$f 2>&1; echo "kbench $sh rc $? ($((SECONDS-START)) s)" >>$S)
  grep -E "^CHECK .*(ring|FAIL)" $f | head -8 >>$S
  grep -E "^qgemv-(lean|ring[35])(-tm)? m=(1|2|4|8) [a-z0-9]+ [a-z]+ [0-9x]+( w4| w8| u1w4| u1w8)? +[0-9]" $f | grep -v " l2 " | head -40 >>$S
done
for n in 4 8; do
  for r in 0 3; do e2e int4_b${n}_ring$r /tmp/q7b "FRUGAL_QGEMV_RING=$r" $B --batches $n --precision int4; done
done
finish 2
