#!/usr/bin/env bash
# Session 62, run 2: issue 19.3's L2 prefetch of the FFN weights under MLA's attention chain, and
# (on an H200) every record of run 1.
# The attention part of a V2-Lite layer at batch 1 is ~28 us of latency-bound kernels that move
# ~28 MB (H100: ~1 TB/s of ~3), and the MoE after it is bandwidth-bound (138 MB a layer at batch 1,
# ~88% of copy). The MLA prologue + absorb launch now asks L2 for the shared experts' weights
# (34.6 MB: gate / up 23 MB, down 11.5 MB; `MlaAttentionParams::next_weights`, issued by the
# GEMV blocks after their wait), so the MoE reads them from L2. Prediction (H100): the MoE
# kernels' DRAM bytes 138 -> ~104 MB a layer, ~-8 to -11 us of an ~87 us layer if L2 keeps the
# lines (50 MB; ~11 MB of other traffic between), +8-12% on V2-Lite batch 1; less if the down
# rows (read after gate_up's 69 MB of routed rows stream through) are evicted: gate / up only
# (FRUGAL_L2_PREFETCH_MB=23) and the evict_last policy (FRUGAL_L2_PREFETCH_LAST=1) tell.
# 1. Tests: mla_attention with the hint (same bits, both policies, a budget), the MLA op tests,
#    the batched GEMV and fused tests, the DeepSeek CUDA golden.
# 2. V2-Lite batch 1: whole hint / none / 23 MB / whole with evict_last, twice each.
# 3. On an H200 only: run 1's records (7B batch 1 in four precisions, 7B int4 / bf16 at 16 / 64).
# Run as: run(command: "STOP=560 bash docs/perf/data/2026-12-07-session62/run2.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_harness_test cuda_golden_test"; build; unset TARGETS
(timeout 120 build-gpu/tests/cuda/cuda_ops_test \
   --gtest_filter='CudaAttention.Mla*:CudaFused.AttentionBatchedMatmul*:CudaFused.MlaAttention*:CudaBatchedMatmul.*:CudaFused.Moe*' \
   >$L/tests.log 2>&1; echo "ops tests: rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^\[  (PASSED|FAILED) |Failure$" -A1 $L/tests.log | head -20 >>$S
(timeout 60 build-gpu/tests/cuda/cuda_harness_test --gtest_filter='*MlaAttention*' >$L/harness.log 2>&1
 echo "harness: rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^\[  (PASSED|FAILED) |Failure$" -A1 $L/harness.log | head -10 >>$S
(timeout 60 build-gpu/tests/cuda_golden/cuda_golden_test --gtest_filter='*Deepseek*' >$L/golden.log 2>&1
 echo "golden: rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^\[  (PASSED|FAILED) |Failure$" -A1 $L/golden.log | head -10 >>$S
for i in 1 2; do
  v2l_b1 pf_all_$i ""
  v2l_b1 pf_none_$i FRUGAL_L2_PREFETCH_MB=0
  v2l_b1 pf_23_$i FRUGAL_L2_PREFETCH_MB=23
  v2l_b1 pf_last_$i FRUGAL_L2_PREFETCH_LAST=1
done
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
  for pr in int4 int8 fp8-channel; do e2e q7b_${pr}_b1 /tmp/q7b "" $V --batches 1 --precision $pr; done
  e2e q7b_bf16_b1 /tmp/q7b "" $V --batches 1
  B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
  for n in 16 64; do
    e2e q7b_int4_b$n /tmp/q7b "" $B --batches $n --precision int4
    e2e q7b_bf16_b$n /tmp/q7b "" $B --batches $n
  done
fi
finish 2
