#!/usr/bin/env bash
# The engine-level acceptance runs on the GPU machine, one frugal invocation each, JSON and
# logs under $OUT, a short table last (docs/perf). Steps (any subset, in order):
#   issue4   batch-1 decode (128 in / 256 out) and 2048-token prefill       (~40 s)
#   sweep    decode at 1/8/32/64/256 (512 in / 128 out), 1000 x 128/128      (~90 s)
#   long     1000 x 1024/128 throughput                                     (~100 s)
#   mixed    500 mixed-length requests (16-4096 in, 1-1024 out) vs a 16,384-block pool
#   itl      64 decoders + a 10,000-token prompt (ITL_CHUNKS, default "default")
#   kernels  the kernel-level micro-benchmark (cuda_kernel_bench)
#   long32k  issue 20: 32,768-token prefill and batch-1 decode at a 32k context, per KV dtype
#            (KV_DTYPES, default "bf16 fp8")                                (~25 s each)
#   kvtput   issue 20: KV_PROMPTS (default 256) x 1024/1024 at KV_SEQS (256) sequences, per
#            KV dtype (KV_DTYPES)                                           (~15 s each)
#   prefill_ncu  issue 20: Nsight Compute (--set full) of one prefill attention launch, the row
#            ABENCH_ROW of `cuda_kernel_bench --attn` (default: the wgmma kernel on the last 8k
#            chunk of a 32k prompt)                                        (~20 s)
#   kvmem    kvtput with the KV pool bounded by KV_MEM_UTIL (default 0.32 of the card: ~29 GB of
#            KV on the H200, where bf16 holds ~256 of the 2048-token sequences and fp8 twice that)
# Needs a built build-gpu (scripts/gpu/check.sh build).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # the repository root as working directory; ROOT, OUT, BUILD_DIR
mkdir -p "$OUT" /tmp/q7b
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
F=("$BUILD_DIR/src/cli/frugal" bench offline --dummy-weights /tmp/q7b/config.json --device cuda --gpu h200
   --ceiling-gbps 4259 --ceiling-tflops 790)
TABLE="$OUT/accept_summary.txt"
: >"$TABLE"
run() {  # name, args...
  local name=$1; shift
  local t0=$SECONDS
  "${F[@]}" "$@" --json "$OUT/$name.json" --markdown "$OUT/$name.md" >"$OUT/$name.txt" 2>&1
  local rc=$?
  echo "== $name: rc $rc ($((SECONDS - t0)) s)" >>"$TABLE"
  grep -vE "^ceilings|^bench  " "$OUT/$name.txt" | tail -12 >>"$TABLE"
}
for step in "$@"; do
  case "$step" in
    issue4) run issue4 --prefill-lens 2048 --batches 1 --decode-prompt-len 128 --decode-tokens 256 --reps 5 --warmup 1 ;;
    sweep) run sweep --prefill-lens 512 --reps 2 --warmup 1 --batches 8,32,64,256 --decode-prompt-len 512 \
             --decode-tokens 128 --num-prompts 1000 --input-len 128 --output-len 128 --throughput-reps 2 \
             --max-num-seqs 256 --max-num-batched-tokens 8192 ;;
    long) run long --prefill-lens 1024 --reps 1 --warmup 1 --batches 0 --num-prompts 1000 --input-len 1024 \
            --output-len 128 --throughput-reps 2 --max-num-seqs 256 --max-num-batched-tokens 8192 ;;
    mixed) run mixed --prefill-lens 0 --batches 0 --mixed-prompts 500 --mixed-input-range 16,4096 \
             --mixed-output-range 1,1024 --num-kv-blocks 16384 ;;
    # ITL_CHUNKS: "default" (the engine's long-prefill chunking) and/or long-prefill chunk sizes;
    # ":nosplit" runs that point with the prefill key split off (FRUGAL_PREFILL_SPLIT=0).
    itl) for spec in ${ITL_CHUNKS:-default}; do
           c=${spec%%:*}; args=(); split=1
           [ "$c" = default ] || args=(--long-prefill-chunk-tokens "$c")
           [ "$spec" = "${spec%:nosplit}" ] || split=0
           FRUGAL_PREFILL_SPLIT=$split \
             run "itl_${spec/:/_}" --prefill-lens 0 --batches 0 --itl-probe 64 --itl-long-prompt 10000 "${args[@]}"
         done ;;
    long32k) for dt in ${KV_DTYPES:-bf16 fp8}; do
               run "long32k_$dt" --prefill-lens 32768 --reps 2 --warmup 1 --batches 1 --decode-prompt-len 32768 \
                 --decode-tokens 128 --kv-cache-dtype "$dt" --max-num-batched-tokens 8192
             done ;;
    kvtput) for dt in ${KV_DTYPES:-bf16 fp8}; do
              run "kvtput_$dt" --prefill-lens 0 --batches 0 --num-prompts "${KV_PROMPTS:-256}" --input-len 1024 \
                --output-len 1024 --throughput-reps 1 --max-num-seqs "${KV_SEQS:-256}" --max-num-batched-tokens 8192 \
                --kv-cache-dtype "$dt"
            done ;;
    kvmem) for dt in ${KV_DTYPES:-bf16 fp8}; do
             run "kvmem_$dt" --prefill-lens 0 --batches 0 --num-prompts "${KV_PROMPTS:-1000}" --input-len 1024 \
               --output-len 1024 --throughput-reps 1 --max-num-seqs "${KV_SEQS:-1024}" --max-num-batched-tokens 8192 \
               --kv-cache-dtype "$dt" --gpu-memory-utilization "${KV_MEM_UTIL:-0.32}"
           done ;;
    prefill_ncu) NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
                 FRUGAL_ABENCH_ONLY="${ABENCH_ROW:-wgmma seqs=1 len=8192 ctx=32768}" "$NCU" --set full \
                   -k regex:attention_prefill_kernel -c 1 "$BUILD_DIR/tests/cuda/cuda_kernel_bench" --attn \
                   >"$OUT/prefill_ncu.txt" 2>&1
                 echo "== prefill_ncu: rc $?" >>"$TABLE"
                 grep -E "Duration|Throughput|Issue Slots|Eligible|Warp Cycles|Registers Per|Occupancy|highest" \
                   "$OUT/prefill_ncu.txt" | head -24 >>"$TABLE" ;;
    kernels) "$BUILD_DIR/tests/cuda/cuda_kernel_bench" >"$OUT/kernels.txt" 2>&1
             echo "== kernels: rc $?" >>"$TABLE"; grep -E "7B|gemv m=1 |gemm m=2048|attn prefill" "$OUT/kernels.txt" >>"$TABLE" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
echo "===== accept summary ====="
cat "$TABLE"
