#!/usr/bin/env bash
# Device call 3 of session 34: the prefill tests; FA3 kernel rows with the
# producer's slot lookup and one Nsight Compute profile of it; a same-machine A/B of the decode
# latency trims (binaries built from this tree and from the three files before them).
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
S=$OUT/s3.txt
STOP=${STOP:-480}
left() { echo $((STOP - (SECONDS-START))); }
TARGETS="frugal cuda_ops_test cuda_kernel_bench" bash scripts/gpu/check.sh build >$L/build.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >>$S; grep -E "error|FAILED" $L/build.log | head -5 >>$S
T=build-gpu/tests/cuda/cuda_ops_test
timeout 150 $T --gtest_filter='CudaAttention.Prefill*' >$L/fa3.log 2>&1; echo "fa3 tests rc $?" >>$S; grep -E "^\[  (PASSED|FAILED|SKIPPED)|Failure" $L/fa3.log | head -6 >>$S
FRUGAL_ABENCH_ONLY="len=8192 ctx=32768" timeout 60 build-gpu/tests/cuda/cuda_kernel_bench --attn >$L/attn.txt 2>&1; grep -E "attn prefill" $L/attn.txt | head -4 >>$S
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
l=$(left); [ -n "$NCU" ] && [ $l -gt 200 ] && { FRUGAL_ABENCH_ONLY="fa3 seqs=1 len=8192 ctx=32768" timeout 100 $NCU --set full -k regex:attention_prefill_fa3 -c 1 build-gpu/tests/cuda/cuda_kernel_bench --attn >$L/fa3_ncu.txt 2>&1; echo "ncu rc $? ($((SECONDS-START)) s)" >>$S; grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|Registers Per|Eligible Warps|No Eligible|Tensor|Stall" $L/fa3_ncu.txt | head -20 >>$S; }
cp build-gpu/src/cli/frugal /tmp/frugal_new
for f in gemv.cu elementwise.cu sampling.cu; do cp .devcarry/old/$f src/backend/cuda/$f; done
timeout 120 ninja -C build-gpu frugal >$L/build_old.log 2>&1; echo "old build rc $? ($((SECONDS-START)) s)" >>$S
cp build-gpu/src/cli/frugal /tmp/frugal_old
source scripts/gpu/lib.sh
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
e2e() { # name binary args...
  local name=$1 bin=$2; shift 2
  local l=$(left); [ $l -gt 18 ] || { echo "$name: no time ($l s)" >>$S; return; }
  timeout $((l-2)) $bin bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 --dummy-weights /tmp/q7b/config.json "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|^prefill" $L/$name.txt | tail -1 >>$S
}
D32=(--prefill-lens 0 --reps 2 --warmup 1 --batches 1 --decode-prompt-len 32768 --decode-tokens 128 --max-num-batched-tokens 8192)
B1=(--prefill-lens 0 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 2)
P32=(--prefill-lens 32768 --reps 2 --warmup 1 --batches 0 --max-num-batched-tokens 8192)
e2e dec32k_new /tmp/frugal_new "${D32[@]}"
e2e dec32k_old /tmp/frugal_old "${D32[@]}"
e2e b1_new /tmp/frugal_new "${B1[@]}"
e2e b1_old /tmp/frugal_old "${B1[@]}"
e2e dec32k_new2 /tmp/frugal_new "${D32[@]}"
e2e dec32k_old2 /tmp/frugal_old "${D32[@]}"
FRUGAL_PREFILL_FA3=1 e2e pre32k_fa3 /tmp/frugal_new "${P32[@]}"
tar czf $OUT/logs3.tgz -C $L --exclude='*.o' . 2>/dev/null
cp $L/fa3_ncu.txt $OUT/ 2>/dev/null
cat $S
