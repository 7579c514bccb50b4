#!/usr/bin/env bash
# Session 50, run 2: the tiny MoE down kernel with 1 / 2 / 4 warps an output (moe_tiny.cu;
# FRUGAL_MOE_TINY_DOWN_SPLIT forces one, the default rule takes 4 at V2-Lite's hidden 2048).
# 1. CudaMoe.* (every split against ops::ref, odd shapes, partial blocks, early loads).
# 2. cuda_kernel_bench --moe rows at 1 / 2 tokens, each split.
# 3. V2-Lite batch 1 and 2 end to end at each split, and a kernel trace of batch 1.
# 4. On an H200: the issue points of 18.2 / 18.3 / 19.3.
# Run as: run(command: "STOP=540 bash docs/perf/data/2026-12-06-session50/run2.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build; unset TARGETS
(timeout 200 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaMoe.*' >$L/moe_tests.log 2>&1
 echo "moe tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|OK \]" $L/moe_tests.log | head -12 >>$S
(timeout 100 build-gpu/tests/cuda/cuda_kernel_bench --moe >$L/kmoe.txt 2>&1
 echo "kbench rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "moe_experts v2-lite (1|2) tok" $L/kmoe.txt | grep -v "^CHECK" | head -24 >>$S
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1"
e2e v2l_b1 /tmp/v2l "" $V --batches 1
for s in 1 2; do e2e v2l_b1_split$s /tmp/v2l "FRUGAL_MOE_TINY_DOWN_SPLIT=$s" $V --batches 1; done
e2e v2l_b2 /tmp/v2l "" $V --batches 2
e2e v2l_b2_split1 /tmp/v2l "FRUGAL_MOE_TINY_DOWN_SPLIT=1" $V --batches 2
trace v2l_b1_tr /tmp/v2l "" --prefill-lens 0 --decode-prompt-len 128 --decode-tokens 64 --reps 1 --warmup 1 --batches 1
if grep -q H200 $S; then
  B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
  B1="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
  for prec in int4 int8 fp8-channel; do e2e ${prec}_b1 /tmp/q7b "" $B1 --batches 1 --precision $prec; done
  e2e bf16_b1 /tmp/q7b "" $B1 --batches 1
  e2e int4_b16 /tmp/q7b "" $B --batches 16 --precision int4
  e2e bf16_b16 /tmp/q7b "" $B --batches 16
  e2e int4_b64 /tmp/q7b "" $B --batches 64 --precision int4
  e2e bf16_b64 /tmp/q7b "" $B --batches 64
fi
finish 2
