#!/usr/bin/env bash
# Session 54, run 2: the slab GEMM's warpgroup kernel (quant_gemm_wg.cu: int4 from 33 tokens,
# wgmma m64n64k16 with x in shared memory in the codes' k order) against the mma.sync kernel.
# 1. Tests: CudaQuantGemm.* (every format and shape against the dequantized oracle, the wg kernel
#    in its default plan, one band, many one-quad slices), CudaInt4Tiles8.* (tiled = row-major
#    bits), CudaFused.* and the op harness (also session 53's rope_kv_write NoSplit, 7883af0).
# 2. cuda_kernel_bench --quant on the int4 gate / down shapes: slab2ch (mma.sync) against slabwg.
# 3. 7B int4 decode at 64 / 48 / 33 sequences, FRUGAL_QSLAB_WG=1 against 0; bf16 at 64.
# Run as: run(command: "STOP=560 bash docs/perf/data/2026-12-06-session54/run2.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_harness_test cuda_kernel_bench"; build; unset TARGETS
(timeout 150 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantGemm.*:CudaInt4Tiles8.*:CudaFused.*' >$L/ops.log 2>&1
 echo "ops tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|PASSED|tests ran|Failure" $L/ops.log | head -12 >>$S
grep -B2 -A8 "Failure" $L/ops.log | head -40 >>$S
(timeout 90 build-gpu/tests/cuda/cuda_harness_test >$L/harness.log 2>&1; echo "harness rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|PASSED|tests ran" $L/harness.log | head -6 >>$S
for sh in "int4g128 gate" "int4g128 down"; do
  (FRUGAL_QBENCH_ONLY="$sh" timeout 100 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/qb.log 2>&1; echo "qbench $sh rc $? ($((SECONDS-START)) s)" >>$S)
  grep -E "FAIL|slabwg" $L/qb.log | grep CHECK | head -8 >>$S
  grep -E "qgemm-slab2ch m=(32|64)|qgemm-slabwg m=(32|64)|qgemv-lean-tm m=1 " $L/qb.log | head -12 >>$S
  cat $L/qb.log >>$L/qb_all.log
done
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e int4_b64_wg /tmp/q7b "FRUGAL_QSLAB_WG=1" $B --batches 64 --precision int4
e2e int4_b64_mma /tmp/q7b "FRUGAL_QSLAB_WG=0" $B --batches 64 --precision int4
e2e bf16_b64 /tmp/q7b "" $B --batches 64
e2e int4_b48_wg /tmp/q7b "FRUGAL_QSLAB_WG=1" $B --batches 48 --precision int4
e2e int4_b48_mma /tmp/q7b "FRUGAL_QSLAB_WG=0" $B --batches 48 --precision int4
e2e int4_b64_mma2 /tmp/q7b "FRUGAL_QSLAB_WG=0" $B --batches 64 --precision int4
e2e int4_b64_wg2 /tmp/q7b "FRUGAL_QSLAB_WG=1" $B --batches 64 --precision int4
e2e int4_b33_wg /tmp/q7b "FRUGAL_QSLAB_WG=1" $B --batches 33 --precision int4
e2e int4_b33_mma /tmp/q7b "FRUGAL_QSLAB_WG=0" $B --batches 33 --precision int4
e2e int4_b16 /tmp/q7b "" $B --batches 16 --precision int4
e2e bf16_b16 /tmp/q7b "" $B --batches 16
finish 2
