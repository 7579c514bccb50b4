#!/usr/bin/env bash
# Session 59, run 5 (built, not run: this session's device time went to runs 1-4, all on H100s).
# For the first H200 that comes: every point of issues 18 and 19 whose H200 record is older than
# the landed tree, on one card and one tree.
# 1. 19.3: V2-Lite batch 1 (128 in / 256 out), the sequence and the persistent MLA kernel twice
#    each (the kernel has never run on an H200: its latency-bound chain may weigh differently
#    against the larger copy rate), then the kernel's stamps.
# 2. 18.3: 7B int4 g128 against bf16 at 16 and 64 sequences (512-token prompts, 64 new tokens);
#    the warpgroup int4 GEMM (session 54 on) has run only on H100s.
# 3. 18.2: 7B batch 1 (128 / 256) in int4 g128, int8, fp8 per channel and bf16 (H200 records 411.6 / 333.9 /
#    352.0 / 244.0).
# Run as: run(command: "STOP=560 bash docs/perf/data/2026-12-07-session59/run5.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s5.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal"; build; unset TARGETS
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
for i in 1 2; do
  v2l_b1 v2l_seq_$i FRUGAL_FUSE_MLA_ATTN=0
  v2l_b1 v2l_kernel_$i FRUGAL_FUSE_MLA_ATTN=1
done
v2l_b1 v2l_stamps "FRUGAL_FUSE_MLA_ATTN=1 FRUGAL_MLA_ATTN_STAMPS=4096"
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
for n in 16 64; do
  e2e q7b_int4_b$n /tmp/q7b "" $B --batches $n --precision int4
  e2e q7b_bf16_b$n /tmp/q7b "" $B --batches $n
done
for pr in int4 int8 fp8-channel; do e2e q7b_${pr}_b1 /tmp/q7b "" $V --batches 1 --precision $pr; done
e2e q7b_bf16_b1 /tmp/q7b "" $V --batches 1
finish 5
