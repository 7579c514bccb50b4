#!/usr/bin/env bash
# Session 59, run 3. Issue 19.3: run 2 of session 58 (run here as this session's first call)
# stamped the persistent MLA kernel in the model: the steps after the PDL wait took 38.7 us
# against ~25 us in isolation, where the weights and the cache sit in L2 (step 3, the attention
# over the cache, 13.5 us against 6-10). Two opt-in hints, each alone and together:
#  - FRUGAL_MLA_ATTN_KV_PREFETCH=1: each block asks L2 for its step-3 cache rows with its weights;
#  - FRUGAL_MLA_ATTN_EVICT_LAST=1: the kernel's L2 requests at the evict_last priority.
# 1. CudaFused.MlaAttention* under each (the results may not change: they are hints).
# 2. V2-Lite batch 1 (128 in / 256 out): the sequence, the kernel, and the three, twice each.
# 3. The stamps with both on (the step medians, against run 2's of session 58).
# Both measured slower and were removed after the run (they landed in 89ef273): to run it again, first
#   git apply docs/perf/data/2026-12-07-session59/mla_l2_hints.diff
# Run as: run(command: "STOP=500 bash docs/perf/data/2026-12-07-session59/run3.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s3.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test"; build; unset TARGETS
for envs in "FRUGAL_MLA_ATTN_KV_PREFETCH=1" "FRUGAL_MLA_ATTN_KV_PREFETCH=1 FRUGAL_MLA_ATTN_EVICT_LAST=1"; do
  (env $envs timeout 60 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaFused.MlaAttention*' >$L/fused.log 2>&1
   echo "fused_mla [$envs]: rc $? ($((SECONDS-START)) s)" >>$S)
  grep -E "^\[  (PASSED|FAILED) |Failure$" -A1 $L/fused.log | head -12 >>$S
done
K=FRUGAL_FUSE_MLA_ATTN=1
for i in 1 2; do
  v2l_b1 seq_$i FRUGAL_FUSE_MLA_ATTN=0
  v2l_b1 kernel_$i $K
  v2l_b1 kv_$i "$K FRUGAL_MLA_ATTN_KV_PREFETCH=1"
  v2l_b1 last_$i "$K FRUGAL_MLA_ATTN_EVICT_LAST=1"
  v2l_b1 kv_last_$i "$K FRUGAL_MLA_ATTN_KV_PREFETCH=1 FRUGAL_MLA_ATTN_EVICT_LAST=1"
done
v2l_b1 stamps_kv_last "$K FRUGAL_MLA_ATTN_KV_PREFETCH=1 FRUGAL_MLA_ATTN_EVICT_LAST=1 FRUGAL_MLA_ATTN_STAMPS=4096"
v2l_b1 stamps_kv "$K FRUGAL_MLA_ATTN_KV_PREFETCH=1 FRUGAL_MLA_ATTN_STAMPS=4096"
finish 3
