#!/usr/bin/env bash
# Session 45, device call 4: int4 codes re-laid into kOutInTiles8 at load (CudaBackend::
# prepare_weight; the lean GEMV's warp loads read 512 contiguous bytes). The new test
# (CudaInt4Tiles8.*: every path on the tiled codes, the same bits as on the row-major ones) and
# the quantized GEMV / GEMM tests first, then `ctest -L cuda` (issue 18.1), the kernel rows
# (CHECK tiles8, qgemv-lean-tm beside qgemv-lean), 7B int4 decode with the tiles (the default)
# and without (FRUGAL_INT4_TILES=0) at 1, 16 and 64 sequences (128- and 512-token prompts), and
# 18.4's FP8 2048-token prefill on the H200.
# Run as: run(command: "bash docs/perf/data/2026-12-05-session45/run4.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s4.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
build
(timeout 150 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaInt4Tiles8.*:CudaQuantGemv.*:CudaQuantGemm.*:CudaQuantMatmul.*' \
  >$L/tiles.log 2>&1; echo "tiles/quant tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|OK \]|differ|Expected" $L/tiles.log | head -14 >>$S
(cd build-gpu && timeout 240 ctest -L cuda -j 8 --output-on-failure >$L/ctest.log 2>&1); echo "ctest rc $? ($((SECONDS-START)) s)" >>$S
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/ctest.log | head -12 >>$S
(FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 60 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kb.txt 2>&1; echo "kbench rc $?" >>$S)
grep -E "^CHECK .*tiles8|^qgemv-lean(-tm)? m=(1|2|4|8) int4g128 gate 18944x3584 +[0-9]" $L/kb.txt | head -12 >>$S
B="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1 --precision int4"
B5="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1 --precision int4"
for n in 1 16; do
  e2e int4_b${n}_tiles /tmp/q7b "" $B --batches $n
  e2e int4_b${n}_rows /tmp/q7b "FRUGAL_INT4_TILES=0" $B --batches $n
done
for n in 16 64; do
  e2e int4_p512_b${n}_tiles /tmp/q7b "" $B5 --batches $n
  e2e int4_p512_b${n}_rows /tmp/q7b "FRUGAL_INT4_TILES=0" $B5 --batches $n
done
e2e fp8ch_p2048 /tmp/q7b "" --prefill-lens 2048 --reps 3 --warmup 1 --batches 0 --precision fp8-channel
e2e int4_b1_lmhead8_tiles /tmp/q7b "" $B --batches 1 --lm-head int8
finish 4
