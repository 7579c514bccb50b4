#!/usr/bin/env bash
# Session 57, run 2: MLA's whole attention part in one persistent kernel (mla_attention.cu, the
# fused op mla_attention), for issue 19.3 (V2-Lite batch 1). One build of the working tree.
#  1. CudaFused.MlaAttention* (the kernel within rounding of the op's sequence, eager, twice, and
#     replayed twice from a graph: the same bits each time) first: a hang or a trap shows here.
#  2. V2-Lite batch 1 (128 in / 256 out), FRUGAL_FUSE_MLA_ATTN=1 / 0, twice each.
#  3. The op tests of the landed warpgroup kernel (session 56: CudaQuantGemm, CudaInt4Tiles8) and
#     every CudaFused test; the op harness's mla_attention, mla_kv_prologue (its body moved into
#     mla_prologue.cuh) and attention_batched_matmul cases; the DeepSeek / YaRN goldens.
#  4. A kernel trace of V2-Lite batch 1 with the kernel; 7B int4 / bf16 at 16 and 64 sequences.
# Run as: run(command: "STOP=560 bash docs/perf/data/2026-12-07-session57/run2.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_harness_test cuda_golden_test"; build; unset TARGETS
t() { # tag timeout binary filter
  (timeout $2 build-gpu/tests/$3 --gtest_filter="$4" >$L/$1.log 2>&1; echo "$1: rc $? ($((SECONDS-START)) s)" >>$S)
  grep -E "^\[  (PASSED|FAILED) |cases ran|Failure$" $L/$1.log | head -12 >>$S
  grep -A6 "Failure$" $L/$1.log | head -30 >>$S
}
t fused_mla 90 cuda/cuda_ops_test 'CudaFused.MlaAttention*'
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
ab() { # name env
  local l=$(left); [ $l -gt 30 ] || { echo "$1: no time" >>$S; return; }
  env $2 timeout 75 build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights /tmp/v2l/config.json $V --batches 1 --json $L/$1.json >$L/$1.txt 2>&1
  echo "== $1 rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|engine:" $L/$1.txt | tail -2 >>$S
}
for i in 1 2; do ab v2l_b1_attn1_$i FRUGAL_FUSE_MLA_ATTN=1; ab v2l_b1_attn0_$i FRUGAL_FUSE_MLA_ATTN=0; done
t ops 150 cuda/cuda_ops_test 'CudaQuantGemm.*:CudaInt4Tiles8.*:CudaFused.*'
t harness 150 cuda/cuda_harness_test '*MlaAttention*:*MlaKvPrologue*:*AttentionBatchedMatmul*'
t golden 100 cuda_golden/cuda_golden_test '*'
[ $(left) -gt 45 ] && trace v2l_b1_tr /tmp/v2l "" $V --batches 1
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
for n in 16 64; do e2e H_int4_b$n /tmp/q7b "" $B --batches $n --precision int4; e2e H_bf16_b$n /tmp/q7b "" $B --batches $n; done
finish 2
