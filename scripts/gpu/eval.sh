#!/usr/bin/env bash
# frugal eval on the GPU machine (docs/eval.md); logs and JSON under $OUT, a table last.
# Needs a built build-gpu (scripts/gpu/check.sh build, or TARGETS=frugal). Steps, in order:
#   mmlu   full MMLU 5-shot (14,042 questions) on the dummy-weight DeepSeek-R1-Distill-Qwen-7B
#          shape through the engine (issue 15, acceptance 4: < 5 minutes; docs/perf/)
#   ref    the reference model (models/reference-qwen2-20m) on CUDA: wikitext-2 head PPL, KLD of
#          CUDA bf16 against the CPU fp32 reference, and a 5-shot MMLU subset
# Environment:
#   MMLU_DIR   MMLU in the Hendrycks layout (default: ../shared/data/eval/mmlu, else .devcarry/mmlu;
#              carry it with `cp -r ../shared/data/eval/mmlu .devcarry/mmlu`)
#   TOKENIZER  tokenizer for the 7B run (default: .devcarry/q7b_tok if present, else the
#              reference model's: any tokenizer whose ids fit the 152k vocabulary works for speed)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # the repository root as working directory; ROOT, OUT, BUILD_DIR
mkdir -p "$OUT" /tmp/q7b
F="$BUILD_DIR/src/cli/frugal"
TABLE="$OUT/eval_summary.txt"
: >"$TABLE"
MMLU_DIR="${MMLU_DIR:-}"
if [ -z "$MMLU_DIR" ]; then
  if [ -d ../shared/data/eval/mmlu ]; then MMLU_DIR=../shared/data/eval/mmlu; else MMLU_DIR=.devcarry/mmlu; fi
fi
TOKENIZER="${TOKENIZER:-}"
if [ -z "$TOKENIZER" ]; then
  if [ -f .devcarry/q7b_tok/tokenizer.json ]; then TOKENIZER=.devcarry/q7b_tok; else TOKENIZER=models/reference-qwen2-20m; fi
fi
REF=models/reference-qwen2-20m
run() {  # name, args...
  local name=$1; shift
  local t0=$SECONDS
  "$F" eval "$@" >"$OUT/$name.txt" 2>"$OUT/$name.err"
  local rc=$?
  echo "== $name: rc $rc ($((SECONDS - t0)) s wall)" >>"$TABLE"
  tail -8 "$OUT/$name.txt" >>"$TABLE"
  [ $rc -eq 0 ] || tail -5 "$OUT/$name.err" >>"$TABLE"
}
for step in "$@"; do
  case "$step" in
    mmlu)
      catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b
      echo "mmlu: data $MMLU_DIR, tokenizer $TOKENIZER" >>"$TABLE"
      run mmlu_7b mc --model /tmp/q7b/config.json --dummy-weights --tokenizer "$TOKENIZER" --data "$MMLU_DIR" \
        --format mmlu --shots 5 --device cuda --max-model-len 8192 --max-num-seqs 256 --max-num-batched-tokens 16384 \
        --json "$OUT/mmlu_7b.json" --csv "$OUT/mmlu_7b.csv" ;;
    ref)
      W=tests/data/eval_oracle/wikitext-2-test-head.txt
      run ref_ppl_cpu ppl --model $REF --text $W --ctx 512 --save-logits /tmp/ref_cpu.logits --json "$OUT/ref_ppl_cpu.json"
      run ref_ppl_cuda ppl --model $REF --text $W --ctx 512 --device cuda --json "$OUT/ref_ppl_cuda.json"
      run ref_kld_cuda kld --model $REF --reference /tmp/ref_cpu.logits --device cuda --json "$OUT/ref_kld_cuda.json"
      run ref_mc_cuda mc --model $REF --data tests/data/eval/oracle-mmlu --format mmlu --shots 5 --device cuda \
        --json "$OUT/ref_mc_cuda.json" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
echo "===== eval summary ====="
cat "$TABLE"
