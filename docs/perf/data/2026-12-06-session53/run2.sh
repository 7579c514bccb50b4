#!/usr/bin/env bash
# Session 53, run 2. Run 1 measured the cluster norm slower (removed) and the slab GEMM's L2
# hints small against a build whose code loads all took a cache-policy operand, slower at every
# point than session 52. Here the tree (the slab's partials stored L2 evict_last, nothing else
# changed) against session 52's HEAD (run2.diff reversed), two builds on one machine, A/B
# interleaved; the bit test and the op harness (the plain norm kernel lost its unused SplitY
# parameter); a trace at 64 sequences.
# Run as: run(command: "STOP=560 bash docs/perf/data/2026-12-06-session53/run2.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s2.txt
D=docs/perf/data/2026-12-06-session53
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
mkdir -p /tmp/base && tar -c --exclude=./build-gpu . | tar -x -C /tmp/base
(cd /tmp/base && patch -s -R -p1 <$D/run2.diff && echo "base: patch reversed" >>$S)
export TARGETS="frugal cuda_ops_test cuda_harness_test"; build; unset TARGETS
(cd /tmp/base && BUILD_DIR=/tmp/base/build-gpu TARGETS=frugal OUT=/tmp/base-out bash scripts/gpu/check.sh build >$L/build_base.log 2>&1
 echo "base build rc $? ($((SECONDS-START)) s)" >>$S)
(timeout 90 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaFused.Split*' >$L/ops.log 2>&1
 echo "ops tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|Failure|PASSED|differ|did not run|one slice" $L/ops.log | head -8 >>$S
(timeout 150 build-gpu/tests/cuda/cuda_harness_test >$L/harness.log 2>&1
 echo "op harness rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|PASSED" $L/harness.log | head -8 >>$S
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
# e2e with another binary: eb name bin cfg env args...
eb() {
  local name=$1 bin=$2 cfg=$3 envs=$4; shift 4
  local l=$(left); [ $l -gt 18 ] || { echo "$name: no time ($l s)" >>$S; return; }
  env $envs timeout $((l-2)) $bin bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights $cfg/config.json "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|^prefill|engine:" $L/$name.txt | tail -3 >>$S
}
NEW=build-gpu/src/cli/frugal; BASE=/tmp/base/build-gpu/src/cli/frugal
for r in a b; do
  eb int4_b64_new_$r $NEW /tmp/q7b "" $B --batches 64 --precision int4
  eb int4_b64_base_$r $BASE /tmp/q7b "" $B --batches 64 --precision int4
  eb int4_b16_new_$r $NEW /tmp/q7b "" $B --batches 16 --precision int4
  eb int4_b16_base_$r $BASE /tmp/q7b "" $B --batches 16 --precision int4
done
eb int8_b16_new $NEW /tmp/q7b "" $B --batches 16 --precision int8
eb int8_b16_base $BASE /tmp/q7b "" $B --batches 16 --precision int8
eb int8_b64_new $NEW /tmp/q7b "" $B --batches 64 --precision int8
eb int8_b64_base $BASE /tmp/q7b "" $B --batches 64 --precision int8
trace int4_b64_tr /tmp/q7b "" $B --batches 64 --precision int4
eb bf16_b16 $NEW /tmp/q7b "" $B --batches 16
eb bf16_b64 $NEW /tmp/q7b "" $B --batches 64
eb int4_b1_new $NEW /tmp/q7b "" --prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1 --batches 1 --precision int4
finish 2
