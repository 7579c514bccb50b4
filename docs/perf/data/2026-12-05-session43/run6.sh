#!/usr/bin/env bash
# Session 43's open question for the next device call (not yet run): the int4 step pairing
# (commit f1bc3dc, pairing.diff here) against the mapping before it, on ONE machine. Runs 1 and 4
# were on different H100s: the lean GEMV at m = 8 read 22.8 us after against 21.0 before, the
# slab GEMM 5-8% faster. This builds a second tree with pairing.diff reversed (/tmp/legacy) and
# times both: the int4 gate's kernel rows at m = 1..8 and the slab's, 7B int4 decode at 1, 2, 4,
# 8, 16 and 64 sequences. On an H200 it also gives the 18.2 / 18.3 points there.
# Run as: run(command: "bash docs/perf/data/2026-12-05-session43/run6.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s6.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_kernel_bench"; build
mkdir -p /tmp/legacy && tar cf - --exclude=./build-gpu --exclude=./.git . | tar xf - -C /tmp/legacy
D=docs/perf/data/2026-12-05-session43
(cd /tmp/legacy && { patch -R -p1 <$D/pairing.diff >/dev/null 2>&1 || git apply -R $D/pairing.diff; } &&
  OUT=/tmp/legacy_out bash scripts/gpu/check.sh build >/dev/null 2>&1; echo "legacy build rc $? ($((SECONDS-START)) s)" >>$S)
unset TARGETS
for b in . /tmp/legacy; do
  tag=$([ $b = . ] && echo paired || echo legacy)
  (FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 60 $b/build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kb_$tag.txt 2>&1)
  echo "kbench $tag rc $?" >>$S
  grep -E "^qgemv(-lean)? m=(1|2|4|8) int4g128 gate 18944x3584 +[0-9]|^qgemm-slab2ch m=(16|64) .*us \[" $L/kb_$tag.txt >>$S
done
# The GEMV's loads alone (the "qload" rows, cuda_bench_load.cu): the lean GEMV's tile order
# against the same bytes read linearly, on the gate and down shapes. If the tile order alone
# stays near the lean GEMV's ~60-67% of the copy rate, the layout of the codes is the bound; if
# it reaches the copy rate, the arithmetic is.
(FRUGAL_QBENCH_ONLY="int4g128 down" timeout 60 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/kb_down.txt 2>&1; echo "kbench down rc $?" >>$S)
grep -h -E "^qload .*us \[|^qgemv-lean m=1 int4g128 (gate|down) [0-9x]+ +[0-9]" $L/kb_paired.txt $L/kb_down.txt >>$S
B="--prefill-lens 0 --decode-prompt-len 128 --decode-tokens 128 --reps 2 --warmup 1 --precision int4"
for n in 1 2 4 8 16 64; do
  for b in . /tmp/legacy; do
    tag=$([ $b = . ] && echo paired || echo legacy)
    l=$(left); [ $l -gt 18 ] || { echo "b$n $tag: no time" >>$S; continue; }
    timeout $((l-2)) $b/build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
      --dummy-weights /tmp/q7b/config.json $B --batches $n --json $L/b${n}_$tag.json >$L/b${n}_$tag.txt 2>&1
    echo "== int4 b$n $tag rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode" $L/b${n}_$tag.txt | tail -1 >>$S
  done
done
finish 6
