#!/usr/bin/env bash
# Session 48, run 5 (written for the next device call; it has not run): the slab GEMM's
# row-group tickets (FRUGAL_QSLAB_TICKETS=1: the last warp to finish a row group adds the slices'
# partials from L2, no reduce kernel; the reduce kernel's bits), what run 4 had no time for, and
# the H200 points of issue 18.
# 1. Correctness: the tickets test (CudaInt4Tiles8.*: the reduce kernel's bits, tickets left
#    zero), the slab harness with tickets on, and the attention tests run 4 cut off.
# 2. The tickets end to end at 16 / 64 sequences, against the default.
# 3. The split rule at 4 / 8 / 32 sequences against the wave rule; the kernel sweep.
# 4. Batch 1 int4 / int8 / fp8 / bf16 (18.2) with this tree's defaults (on an H200: the machine).
# Run as: run(command: "bash docs/perf/data/2026-12-06-session48/run5.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s5.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_kernel_bench cuda_ops_test cuda_harness_test"; build; unset TARGETS
gtest() { # name binary filter env
  local l=$(left); [ $l -gt 30 ] || { echo "$1: no time ($l s)" >>$S; return; }
  (env $4 timeout $((l < 200 ? l - 5 : 200)) build-gpu/tests/cuda/$2 --gtest_filter="$3" >$L/$1.log 2>&1; echo "$1 rc $? ($((SECONDS-START)) s)" >>$S)
  grep -E "FAILED|Failure|PASSED|tickets" $L/$1.log | head -8 >>$S
}
gtest tickets_test cuda_ops_test 'CudaInt4Tiles8.*' ""
gtest slab_harness_tickets cuda_harness_test '*Slab*Matmul*' "FRUGAL_QSLAB_TICKETS=1"
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
for b in 16 64; do
  e2e int4_b${b} /tmp/q7b "" $B --batches $b --precision int4
  e2e int4_b${b}_tickets /tmp/q7b "FRUGAL_QSLAB_TICKETS=1" $B --batches $b --precision int4
done
e2e bf16_b16 /tmp/q7b "" $B --batches 16
e2e bf16_b64 /tmp/q7b "" $B --batches 64
gtest attention_rest cuda_ops_test 'CudaAttention.DecodeMmaNoSplitLargeBatch:CudaAttention.DecodeLongContextTunings:CudaAttention.DecodeTuningsWindowsSinksAndBatches:CudaAttention.DecodeTuningDispatch:CudaAttention.Mla*:CudaAttention.Generic*' ""
B1="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
for prec in int4 int8 fp8-channel; do e2e ${prec}_b1 /tmp/q7b "" $B1 --batches 1 --precision $prec; done
e2e bf16_b1 /tmp/q7b "" $B1 --batches 1
for b in 8 32 4; do
  e2e int4_b${b} /tmp/q7b "" $B --batches $b --precision int4
  e2e int4_b${b}_wave /tmp/q7b "FRUGAL_DECODE_WHOLE_UNITS=0" $B --batches $b --precision int4
done
# The slab kernel's default path changed registers with the tickets' code (ptxas 13: int4 m = 16
# 123 -> 120, m = 64 250 -> 242, no spills): its gate rows against session 45 run 3's (H200).
l=$(left); [ $l -gt 60 ] && { (FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 60 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kq.txt 2>&1; echo "kbench quant gate rc $? ($((SECONDS-START)) s)" >>$S); grep -E "qgemm-slab2ch m=(16|64) " $L/kq.txt >>$S; }
l=$(left); [ $l -gt 40 ] && { (timeout 40 build-gpu/tests/cuda/cuda_kernel_bench --decode-splits >$L/splits.txt 2>&1; echo "kbench splits rc $? ($((SECONDS-START)) s)" >>$S); grep -E "decode splits" $L/splits.txt >>$S; }
finish 5
