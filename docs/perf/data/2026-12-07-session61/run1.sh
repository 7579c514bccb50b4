#!/usr/bin/env bash
# Session 61, run 1. Issue 19.3: the MLA attention chain at V2-Lite batch 1, shorter by one
# launch and by the HBM round trips that can run before a kernel's PDL wait:
#  - the tensor-core MLA decode kernel copies its split's older cache rows (every row but the
#    step's own) into shared memory before the wait (FRUGAL_MLA_EARLY, default on). At batch 1 a
#    split is two 32-key tiles, and the ring issued the second tile only after the first landed:
#    two DRAM round trips after the wait, now none (the step's own row and q come after it);
#  - the batched GEMV (W_abs), the fused merge + W_UV and the new prologue + absorb launch load
#    their first round of weight chunks before the wait (FRUGAL_BATCHED_GEMV_EARLY, default on);
#  - the latent prologue and the absorbed q projection in one launch (FRUGAL_FUSE_MLA_PRO_ABS,
#    default on): W_abs's rope rows are an identity, so the prologue writes the rotated q_pe into
#    [q_abs | q_pe] itself and the GEMV reads only q's nope part; neither waits for the other.
# Session 60's chain (H100, one middle layer): prologue +3.0 us, W_abs +3.3, MLA decode +8.2,
# merge + W_UV +4.8. Prediction: decode -3 to -4 us, W_abs and W_UV ~-1 us each, the launch
# ~-2.5 us: ~7-8 us of a ~93 us layer, +7-9% on V2-Lite batch 1 (H100 ~370 -> ~395-400 tok/s).
# 1. Tests: the MLA kernels (early and not, same bits), the batched GEMV variants, the fused
#    merge + W_UV (early and not), mla_attention (the persistent kernel, and the one launch: the
#    sequence's bits), and the DeepSeek CUDA golden (the model's promise on real configs).
# 2. V2-Lite batch 1: all on, the launch off, all off (session 60's kernels), MLA early off, GEMV
#    early off; twice each.
# 3. Forced 8 and 12 MLA splits (all on); traces all on and all off, split by layer_split.py.
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_golden_test"; build; unset TARGETS
(timeout 150 build-gpu/tests/cuda/cuda_ops_test \
   --gtest_filter='CudaAttention.Mla*:CudaFused.AttentionBatchedMatmul*:CudaFused.MlaAttention*:CudaBatchedMatmul.*' \
   >$L/tests.log 2>&1; echo "ops tests: rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^\[  (PASSED|FAILED) |Failure$" -A1 $L/tests.log | head -20 >>$S
(timeout 60 build-gpu/tests/cuda_golden/cuda_golden_test --gtest_filter='*Deepseek*' >$L/golden.log 2>&1
 echo "golden: rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^\[  (PASSED|FAILED) |Failure$" -A1 $L/golden.log | head -10 >>$S
OFF="FRUGAL_MLA_EARLY=0 FRUGAL_BATCHED_GEMV_EARLY=0 FRUGAL_FUSE_MLA_PRO_ABS=0"
for i in 1 2; do
  v2l_b1 all_$i ""
  v2l_b1 proabs_off_$i FRUGAL_FUSE_MLA_PRO_ABS=0
  v2l_b1 none_$i "$OFF"
  v2l_b1 mla_off_$i FRUGAL_MLA_EARLY=0
  v2l_b1 gemv_off_$i FRUGAL_BATCHED_GEMV_EARLY=0
done
# With the rows early a split's tiles cost less after the wait, so more splits may pay now.
for n in 8 12; do v2l_b1 splits${n} FRUGAL_MLA_SPLITS=$n; done
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
[ $(left) -gt 45 ] && trace all_tr /tmp/v2l "" $V --batches 1
[ $(left) -gt 45 ] && trace none_tr /tmp/v2l "$OFF" $V --batches 1
for t in $L/trace_all_tr/decode_b1.trace.json $L/trace_none_tr/decode_b1.trace.json; do
  [ -f $t ] && python3 docs/perf/data/2026-12-07-session58/layer_split.py $t >>$S 2>&1
done
finish 1
