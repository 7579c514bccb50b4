#!/usr/bin/env bash
# Session 62, run 1 (after run 2, which ran first on an H100): every H200 record of issues 18 and 19 on the landed tree (83ea61b), whose
# H200 records date from session 45 (18.2, 19.3) and session 59's H100s (18.3), plus the GPU run
# of session 61's last two refactors (0d97cce: mla.cu's shared batched rows; 83ea61b: one
# DefaultOnSwitch for six kernel switches), which no device has run yet.
# 1. (The op tests and the DeepSeek golden of those refactors ran in run 2 on an H100 and passed;
#    run 1 builds only frugal.)
# 2. 19.3: V2-Lite batch 1 (128 in / 256 out), twice (record 422.6; predicted ~440).
# 3. 18.2: 7B batch 1 (128 / 256): int4 g128, int8, fp8 per channel, bf16 (records 411.6 / 333.9 /
#    352.0 / 244.0; H100 gains since predict int4 ~435).
# 4. 18.3: 7B int4 g128 against bf16 at 16 and 64 sequences (512-token prompts, 64 new tokens).
# Run as: run(command: "STOP=560 bash docs/perf/data/2026-12-07-session62/run1.sh", carry: [".devcarry"], needs_h200: true)
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal"; build; unset TARGETS
for i in 1 2; do v2l_b1 v2l_$i ""; done
V="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1"
for pr in int4 int8 fp8-channel; do e2e q7b_${pr}_b1 /tmp/q7b "" $V --batches 1 --precision $pr; done
e2e q7b_bf16_b1 /tmp/q7b "" $V --batches 1
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
for n in 16 64; do
  e2e q7b_int4_b$n /tmp/q7b "" $B --batches $n --precision int4
  e2e q7b_bf16_b$n /tmp/q7b "" $B --batches $n
done
# 5. 19.3's throughput point (met since session 36: 13,817), re-checked on this tree.
TP=(--prefill-lens 0 --batches 0 --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs 256 --max-num-batched-tokens 8192 --throughput-reps 1)
e2e v2l_tp1000 /tmp/v2l "" "${TP[@]}"
finish 1
