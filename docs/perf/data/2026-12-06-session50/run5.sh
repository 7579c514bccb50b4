#!/usr/bin/env bash
# Session 50, run 5: the slab GEMM at m <= 16 with a quad's mma steps outermost (opt-in,
# FRUGAL_QSLAB_SO=1|2: one / two quads in flight a warp; 76-80 registers, three blocks an SM).
# Run 4's profile (H100, int4 g128 gate at m = 9): 128 registers, 2 blocks an SM, 3.7 warps a
# scheduler of which 1.0 eligible, half the issue slots empty, DRAM at 48%.
# 1. Correctness: the new path's bits against the default's on row-major and tiled codes
#    (CudaInt4Tiles8.*), and against the dequantized oracle in every format (CudaQuantGemm.*).
# 2. The kernel rows (int4 g128 gate, slab2ch / slabso / slabso2 at m = 9 / 16).
# 3. 7B int4 and int8 at 16 sequences and int4 at 12, default against SO=1 and SO=2.
# Run as: run(command: "STOP=540 bash docs/perf/data/2026-12-06-session50/run5.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s5.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build; unset TARGETS
(timeout 150 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaInt4Tiles8.*:CudaQuantGemm.*' >$L/so_tests.log 2>&1
 echo "so tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|OK \]|bits differ" $L/so_tests.log | head -12 >>$S
(FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 90 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kq.txt 2>&1
 echo "kbench rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^CHECK .*slabso.* (bad|FAIL)|qgemm-slab(2ch|so|so2) m=(1|9|16) " $L/kq.txt | head -12 >>$S
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e int4_b16 /tmp/q7b "" $B --batches 16 --precision int4
e2e int4_b16_so1 /tmp/q7b "FRUGAL_QSLAB_SO=1" $B --batches 16 --precision int4
e2e int4_b16_so2 /tmp/q7b "FRUGAL_QSLAB_SO=2" $B --batches 16 --precision int4
e2e int8_b16 /tmp/q7b "" $B --batches 16 --precision int8
e2e int8_b16_so1 /tmp/q7b "FRUGAL_QSLAB_SO=1" $B --batches 16 --precision int8
e2e int4_b12 /tmp/q7b "" $B --batches 12 --precision int4
e2e int4_b12_so1 /tmp/q7b "FRUGAL_QSLAB_SO=1" $B --batches 12 --precision int4
finish 5
