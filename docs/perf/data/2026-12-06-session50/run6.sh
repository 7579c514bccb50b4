#!/usr/bin/env bash
# Session 50, run 6: the slab GEMM's load cursor with its two row pointers built once a group
# (one row tile a warp: m <= 16 by default) instead of for every chunk. Run 4's SASS of the int4
# m = 16 kernel: ~135 of the ~1,060 instructions of a 2-quad batch rebuilt the clamped rows, both
# layouts' addresses and their 64-bit products each batch. Same loads, same bits.
# A/B on one machine: this tree against a copy with the previous header, each built here. The
# previous header is not kept in the tree; before the call:
#   git show 2e95c27:src/backend/cuda/quant_gemm_slab.cuh > docs/perf/data/2026-12-06-session50/quant_gemm_slab_before.cuh
# Run as: run(command: "STOP=360 bash docs/perf/data/2026-12-06-session50/run6.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s6.txt
D=docs/perf/data/2026-12-06-session50
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
mkdir -p /tmp/old && tar cf - --exclude=./build-gpu . | (cd /tmp/old && tar xf -)
cp $D/quant_gemm_slab_before.cuh /tmp/old/src/backend/cuda/quant_gemm_slab.cuh
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build; unset TARGETS
(cd /tmp/old && TARGETS="frugal cuda_kernel_bench" bash scripts/gpu/check.sh build >$L/build_old.log 2>&1; echo "old build rc $? ($((SECONDS-START)) s)" >>$S)
(timeout 100 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaInt4Tiles8.*:CudaQuantGemm.*' >$L/tests.log 2>&1
 echo "tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|bits differ" $L/tests.log | head -8 >>$S
for v in new old; do
  bin=build-gpu; [ $v = old ] && bin=/tmp/old/build-gpu
  FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 60 $bin/tests/cuda/cuda_kernel_bench --quant >$L/kq_$v.txt 2>&1
  echo "kbench $v rc $? ($((SECONDS-START)) s)" >>$S
  grep -E "qgemm-slab2ch m=(1|9|16) " $L/kq_$v.txt | head -3 | sed "s/^/$v /" >>$S
done
e2eb() { # name bin args...
  local name=$1 bin=$2; shift 2
  local l=$(left); [ $l -gt 18 ] || { echo "$name: no time ($l s)" >>$S; return; }
  timeout $((l-2)) $bin/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights /tmp/q7b/config.json "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode" $L/$name.txt | tail -1 >>$S
}
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1 --batches 16"
e2eb int4_b16_new build-gpu $B --precision int4
e2eb int4_b16_old /tmp/old/build-gpu $B --precision int4
e2eb int8_b16_new build-gpu $B --precision int8
e2eb int8_b16_old /tmp/old/build-gpu $B --precision int8
e2eb int4_b16_new2 build-gpu $B --precision int4
finish 6
