#!/usr/bin/env bash
# Session 45's last script, NOT YET RUN (no machine was lent for it): int8 codes in kOutInTiles8
# too (tiles8_fits: k % 64 == 0; fp8 stays row-major for W8A8; FRUGAL_INT4_TILES renamed
# FRUGAL_QUANT_TILES). The change is int8_tiles.diff beside this script, applied here first; it
# lands only if these tests pass. The tiles test (now int4 and int8) and the quantized GEMV / GEMM
# tests, cuda_quant_model_test (the int8 / int4 fixtures against transformers, tiled at load),
# the int8 kernel rows (CHECK tiles8, qgemv-lean-tm beside qgemv-lean), and 7B int8 decode with
# and without the tiles at 1 and 16 sequences, int4 at batch 1 again.
# Run as: run(command: "bash docs/perf/data/2026-12-05-session45/run5.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s5.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
patch -p1 <docs/perf/data/2026-12-05-session45/int8_tiles.diff >$L/patch.log 2>&1; echo "int8_tiles.diff rc $?" >>$S
export TARGETS="frugal cuda_ops_test cuda_quant_model_test cuda_kernel_bench"; build; unset TARGETS
(timeout 150 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaInt4Tiles8.*:CudaQuantGemv.*:CudaQuantGemm.*:CudaQuantMatmul.*' \
  >$L/tiles.log 2>&1; echo "tiles/quant tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|OK \]|differ|Expected" $L/tiles.log | head -14 >>$S
(timeout 120 build-gpu/tests/cuda/cuda_quant_model_test >$L/qmodel.log 2>&1; echo "cuda_quant_model_test rc $?" >>$S)
grep -E "FAILED|PASSED|tests ran" $L/qmodel.log | head -6 >>$S
(FRUGAL_QBENCH_ONLY="int8 gate" timeout 60 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kb.txt 2>&1; echo "kbench rc $?" >>$S)
grep -E "^CHECK .*tiles8|^qgemv-lean(-tm)? m=(1|2|4|8) int8 gate 18944x3584 +[0-9]" $L/kb.txt | head -12 >>$S
B="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
for n in 1 16; do
  e2e int8_b${n}_tiles /tmp/q7b "" $B --batches $n --precision int8
  e2e int8_b${n}_rows /tmp/q7b "FRUGAL_QUANT_TILES=0" $B --batches $n --precision int8
done
e2e int4_b1_tiles /tmp/q7b "" $B --batches 1 --precision int4
e2e int4_b1_rows /tmp/q7b "FRUGAL_QUANT_TILES=0" $B --batches 1 --precision int4
finish 5
