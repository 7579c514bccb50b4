#!/usr/bin/env bash
# Session 59, run 4. Issue 19.3: the two changes session 59's accounting names for the persistent
# MLA kernel (docs/perf/2026-12-07-session59.md), each alone and together:
#  - FRUGAL_MLA_ATTN_EARLY=2: only the q / kv_a rows copied before the PDL wait; the o rows and the
#    W_abs / W_UV L2 requests after it (the early copy cost the MoE down kernel ~5 us a layer);
#  - FRUGAL_MLA_ATTN_KV_EARLY=1: each block's first unit's cache rows copied into region A at the
#    end of step 1, so step 3 (13.5 us in the model) copies only the new row.
# 1. CudaFused.MlaAttention* (now also: the rows copied in step 1 give the same bits, eager and
#    from a graph, at contexts 1 to 4100), with its stamp lines.
# 2. V2-Lite batch 1 (128 in / 256 out): the sequence, the kernel, and the three, twice each.
# 3. The stamps with both on.
# Neither was faster, so both were removed after the run (they landed in fbf0dee): to run it again,
# first  git apply docs/perf/data/2026-12-07-session59/mla_early2_kv_early.diff
# Run as: run(command: "STOP=440 bash docs/perf/data/2026-12-07-session59/run4.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s4.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test"; build; unset TARGETS
(timeout 90 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaFused.MlaAttention*' >$L/fused.log 2>&1
 echo "fused_mla: rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "^\[  (PASSED|FAILED) |Failure$|after the wait|copied in step 1" -A1 $L/fused.log | head -40 >>$S
K=FRUGAL_FUSE_MLA_ATTN=1
for i in 1 2; do
  v2l_b1 seq_$i FRUGAL_FUSE_MLA_ATTN=0
  v2l_b1 kernel_$i $K
  v2l_b1 early2_$i "$K FRUGAL_MLA_ATTN_EARLY=2"
  v2l_b1 kv_early_$i "$K FRUGAL_MLA_ATTN_KV_EARLY=1"
  v2l_b1 both_$i "$K FRUGAL_MLA_ATTN_EARLY=2 FRUGAL_MLA_ATTN_KV_EARLY=1"
done
v2l_b1 stamps_both "$K FRUGAL_MLA_ATTN_EARLY=2 FRUGAL_MLA_ATTN_KV_EARLY=1 FRUGAL_MLA_ATTN_STAMPS=4096"
finish 4
